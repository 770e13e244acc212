"""Every attention container (hybrid, draft runner, multi-step draft) refuses a stamp with its own
reason, refuses to attend or answer a native entry before a plan selected its child, and after
one answers the selected child's native entry."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from paged_reference import scenario

from attn_backends import (
    AttentionBackend,
    CpuPagedBackend,
    DraftExtendBackend,
    DraftRunnerBackend,
    HybridAttentionBackend,
    MultiStepDraftBackend,
    TorchNativeBackend,
)
from attn_backends.backends.container import ContainerBackend


def _stamped(backend: AttentionBackend, name: str) -> AttentionBackend:
    backend.stamp(name)
    return backend


def _containers() -> list[tuple[ContainerBackend, str]]:
    """Each container over stamped leaves, with its stamp refusal word for word."""
    multi_step = MultiStepDraftBackend([_stamped(CpuPagedBackend(), "cpu_paged")])
    return [
        (
            HybridAttentionBackend(
                _stamped(TorchNativeBackend(), "torch_native"), _stamped(CpuPagedBackend(), "cpu_paged")
            ),
            "a hybrid attention container carries no stamp of its own; stamp its children (stamps_children=True)",
        ),
        (
            multi_step,
            "a multi-step draft container carries no stamp of its own; stamp its children (stamps_children=True)",
        ),
        (
            DraftRunnerBackend(DraftExtendBackend(_stamped(TorchNativeBackend(), "torch_native")), multi_step),
            "a draft runner's backend carries no stamp of its own; its extend and multi-step backends carry them",
        ),
    ]


@pytest.mark.parametrize("index", range(3))
def test_a_container_refuses_a_stamp_and_a_call_before_its_plan(index: int) -> None:
    container, refusal = _containers()[index]
    with pytest.raises(TypeError) as refused:
        container.stamp("cpu_paged")
    assert str(refused.value) == refusal
    q = torch.zeros(1, 2, 8)
    with pytest.raises(RuntimeError, match=r"^attend\(\) was called before plan\(\); plan each forward first$"):
        container.attend(q, q, q, scale=1.0)
    with pytest.raises(
        RuntimeError, match=r"^native_attention\(\) was called before plan\(\); plan each forward first$"
    ):
        container.native_attention(torch.float32, torch.float32)


def test_a_planned_container_answers_its_selected_childs_native_entry() -> None:
    """Reverse-verified: with ContainerBackend.native_attention answering None, the step's cpu_paged
    entry was missing here."""
    meta, _ = scenario([3, 0], [1, 1], 4, seed=1)
    meta = dataclasses.replace(meta, forward_mode="decode", draft_step=0)
    container, _ = _containers()[1]
    assert isinstance(container, MultiStepDraftBackend)
    container.plan(meta)
    step = container.child_for(0)
    assert container.select_child(meta) is step
    native, own = (
        container.native_attention(torch.float32, torch.float32),
        step.native_attention(torch.float32, torch.float32),
    )
    assert native is not None and own is not None and native.entry == own.entry  # each call makes its own plan struct
