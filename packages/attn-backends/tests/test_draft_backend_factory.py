"""The draft runner's factory builds its own pair (the draft override first, else the handed pair),
stamps each product with the kernel it built, and answers a backend that selects by forward mode
exactly as `serving_attention_backend(mode, stamp)` names: decode on the multi-step container's
child for the forward's draft step, extend, mixed and draft_extend on the extend wrapper."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from paged_reference import Metadata, paged_tensors, reference, scenario, was_planned

from attn_backends import (
    AttentionBackend,
    AttentionBackendUnavailableError,
    AttentionStamp,
    CpuPagedBackend,
    DraftBackendFactory,
    DraftExtendBackend,
    DraftRunnerBackend,
    ForwardMode,
    MultiStepDraftBackend,
    TorchNativeBackend,
    UnstampedBackendError,
    serving_attention_backend,
)
from config_bags import publish, unpublish
from config_bags.server import Bags, SpecBag

SERVED: tuple[ForwardMode, ...] = ("extend", "mixed", "draft_extend", "decode")


@contextmanager
def _published(**spec: object) -> Iterator[None]:
    """Bags for a draft_model speculation (which requires a draft checkpoint path) with `spec`'s leaves."""
    publish(
        Bags(spec=SpecBag(speculative_algorithm="draft_model", speculative_draft_model_path="/models/draft", **spec)),  # type: ignore[arg-type]
        role="standalone",
    )
    try:
        yield
    finally:
        unpublish()


def _leaves(backend: DraftRunnerBackend) -> list[AttentionBackend]:
    """Every kernel backend the draft runner's backend holds: the extend half, then each step."""
    return [backend.extend.wrapped, *backend.multi_step.attn_backends]


def _as(meta: Metadata, mode: str, draft_step: int | None = None) -> Metadata:
    return dataclasses.replace(meta, forward_mode=mode, draft_step=draft_step)


def test_the_draft_override_builds_both_halves_and_the_stamp_says_so() -> None:
    """Reverse-verified: with the override read removed from DraftBackendFactory.__call__, the
    handed cpu_paged pair was built (stamp prefill 'cpu_paged' != 'torch_native')."""
    with _published(speculative_draft_attention_backend="torch_native"):
        stamp, backend = DraftBackendFactory()("cpu_paged", "cpu_paged", device_type="cpu")
    assert stamp == AttentionStamp(prefill="torch_native", decode="torch_native", is_draft_override=True)
    assert all(
        isinstance(leaf, TorchNativeBackend) and leaf.effective_name == "torch_native" for leaf in _leaves(backend)
    )
    with _published():
        stamp, backend = DraftBackendFactory()("cpu_paged", "cpu_paged", device_type="cpu")
    assert stamp == AttentionStamp(prefill="cpu_paged", decode="cpu_paged", is_draft_override=False)
    assert all(isinstance(leaf, CpuPagedBackend) and leaf.effective_name == "cpu_paged" for leaf in _leaves(backend))


def test_a_caller_cannot_claim_the_draft_override() -> None:
    """Reverse-verified: with the is_draft_override check removed, the call built a pair and raised nothing."""
    with (
        _published(),
        pytest.raises(ValueError, match="decides is_draft_override itself.*accepted from a caller: False, got True"),
    ):
        DraftBackendFactory()("auto", "auto", device_type="cpu", is_draft_override=True)


def test_the_multi_step_container_has_one_stamped_decode_backend_per_step() -> None:
    """Reverse-verified: with the child-stamping loop in `stamp_built` removed, the first child
    raised UnstampedBackendError ("CpuPagedBackend has no effective-name stamp"); with the factory's
    call made a plain stamp (stamps_children=False, one name), the container refused it
    ("carries no stamp of its own")."""
    with _published(speculative_num_steps=4):
        stamp, backend = DraftBackendFactory()("auto", "auto", device_type="cpu")
    multi_step = backend.multi_step
    assert isinstance(multi_step, MultiStepDraftBackend) and len(multi_step.attn_backends) == 4
    assert len({id(child) for child in multi_step.attn_backends}) == 4
    assert [child.effective_name for child in multi_step.attn_backends] == [stamp.decode] * 4 == ["cpu_paged"] * 4
    assert multi_step.effective_name == "multi_step(cpu_paged, cpu_paged, cpu_paged, cpu_paged)"
    assert (
        backend.effective_name
        == "draft(extend=torch_native, decode=multi_step(cpu_paged, cpu_paged, cpu_paged, cpu_paged))"
    )
    with pytest.raises(TypeError, match="multi-step draft container carries no stamp of its own"):
        multi_step.stamp("cpu_paged")
    with pytest.raises(TypeError, match="draft runner's backend carries no stamp of its own"):
        backend.stamp("cpu_paged")


def test_the_extend_wrapper_carries_the_wrapped_backends_stamp() -> None:
    """Reverse-verified: without the stamp copy in WrapperBackend.__init__, the wrapper's
    effective_name raised UnstampedBackendError ("DraftExtendBackend has no effective-name stamp"),
    and wrapping an unstamped backend raised nothing."""
    with _published():
        stamp, backend = DraftBackendFactory()("auto", "auto", device_type="cpu")
    assert isinstance(backend.extend, DraftExtendBackend)
    assert backend.extend.effective_name == backend.extend.wrapped.effective_name == stamp.prefill == "torch_native"
    with pytest.raises(UnstampedBackendError, match="TorchNativeBackend has no effective-name stamp"):
        DraftExtendBackend(TorchNativeBackend())


def test_each_served_mode_plans_the_backend_serving_attention_backend_names() -> None:
    """auto on a CPU builds two kernels, so the halves are told apart: each mode plans exactly one
    leaf, the one `serving_attention_backend(mode, stamp)` names, and attends through it.

    Reverse-verified: sending draft_extend to the multi-step container in
    DraftRunnerBackend.backend_for failed the draft_extend case ("plans decode forwards only, got
    forward_mode 'draft_extend'")."""
    meta, _ = scenario([3, 0], [1, 1], 4, seed=1)
    q, k, v = paged_tensors(meta, heads=4, kv_heads=2, dim=8, dtype=torch.float32, seed=2)
    with _published():
        for mode in SERVED:
            stamp, backend = DraftBackendFactory()("auto", "auto", device_type="cpu")
            backend.plan(_as(meta, mode, draft_step=1 if mode == "decode" else None))
            expected = backend.multi_step.attn_backends[1] if mode == "decode" else backend.extend.wrapped
            assert [was_planned(leaf, q, k, v) for leaf in _leaves(backend)] == [
                leaf is expected for leaf in _leaves(backend)
            ], mode
            assert serving_attention_backend(mode, stamp) == expected.effective_name, mode
            torch.testing.assert_close(backend.attend(q, k, v, scale=0.5), expected.attend(q, k, v, scale=0.5))


def test_a_draft_decode_plans_the_child_its_step_names() -> None:
    """Draft step i plans child i and no other; the container's attention is that child's and the
    reference's on a shuffled paged scenario.

    Reverse-verified: with MultiStepDraftBackend.select_child answering child 0 whatever the step, the
    draft_step 1 case failed (child 0 planned, child 1 not)."""
    meta, slots = scenario([5, 2, 9], [1, 1, 1], 4, seed=3)
    q, k, v = paged_tensors(meta, heads=4, kv_heads=2, dim=8, dtype=torch.float32, seed=4)
    scale = 1 / math.sqrt(8)
    with _published(speculative_num_steps=3):
        for step in range(3):
            _, backend = DraftBackendFactory()("cpu_paged", "cpu_paged", device_type="cpu")
            children = backend.multi_step.attn_backends
            assert (
                backend.backend_for("decode") is backend.multi_step
                and backend.multi_step.child_for(step) is children[step]
            )
            backend.plan(_as(meta, "decode", draft_step=step))
            assert [was_planned(child, q, k, v) for child in children] == [i == step for i in range(3)], step
            out = backend.attend(q, k, v, scale=scale)
            torch.testing.assert_close(out, children[step].attend(q, k, v, scale=scale))
            torch.testing.assert_close(out.double(), reference(q, k, v, meta, slots, scale), atol=1e-5, rtol=1e-5)


def test_what_a_draft_runner_does_not_serve_is_refused_with_what_was_wrong() -> None:
    """Reverse-verified, each guard removed in turn: without the None check the decode without a
    step raised TypeError ("'<=' not supported"), not this ValueError; without the range check
    step 3 raised IndexError and step -1 planned the last child silently; without the refused
    modes target_verify planned the extend half (DID NOT RAISE) and idle reached the multi-step
    container ("plans decode forwards only"); without the decode-only check an extend forward
    naming step 0 planned child 0 (DID NOT RAISE)."""
    meta, _ = scenario([3, 4], [1, 1], 4, seed=5)
    with _published(speculative_num_steps=3):
        _, backend = DraftBackendFactory()("auto", "auto", device_type="cpu")
        with pytest.raises(ValueError, match=r"names its draft step \(0 to 2\) in metadata.draft_step; got None"):
            backend.plan(_as(meta, "decode"))
        for step in (3, -1):
            with pytest.raises(
                ValueError, match=rf"draft_step {step} is out of range: this container has 3 steps, 0 to 2"
            ):
                backend.plan(_as(meta, "decode", draft_step=step))
        for mode in ("target_verify", "idle"):
            with pytest.raises(
                ValueError, match=rf"serves extend, mixed, draft_extend and decode forwards, got '{mode}'"
            ):
                backend.plan(_as(meta, mode))
        with pytest.raises(ValueError, match="plans decode forwards only, got forward_mode 'extend'"):
            backend.multi_step.plan(_as(meta, "extend", draft_step=0))


def test_a_batch_invariant_draft_runner_builds_cpu_paged_or_is_refused() -> None:
    """Reverse-verified: with the prefill half built with batch_invariant=False, auto's prefill half
    built torch_native (stamp prefill 'torch_native' != 'cpu_paged'); with both halves so, the
    torch_native override was not refused."""
    with _published():
        stamp, backend = DraftBackendFactory()("auto", "auto", device_type="cpu", batch_invariant=True)
    assert stamp == AttentionStamp(prefill="cpu_paged", decode="cpu_paged", is_draft_override=False)
    assert all(isinstance(leaf, CpuPagedBackend) and leaf.effective_name == "cpu_paged" for leaf in _leaves(backend))
    with (
        _published(speculative_draft_attention_backend="torch_native"),
        pytest.raises(
            AttentionBackendUnavailableError,
            match="torch_native for the prefill half cannot serve deterministic inference",
        ),
    ):
        DraftBackendFactory()("auto", "auto", device_type="cpu", batch_invariant=True)


def test_the_extend_wrapper_counts_the_query_tokens_it_served() -> None:
    """Extend and draft_extend forwards add their query tokens; a draft decode, on the multi-step
    container, adds none.

    Reverse-verified: with the count removed from DraftExtendBackend.plan, extended_tokens stayed 0."""
    prompt, _ = scenario([0, 2], [3, 4], 4, seed=6)
    catch_up, _ = scenario([9, 6], [1, 1], 4, seed=7)
    with _published():
        _, backend = DraftBackendFactory()("auto", "auto", device_type="cpu")
        assert backend.extend.extended_tokens == 0
        backend.plan(_as(prompt, "extend"))
        assert backend.extend.extended_tokens == 7
        backend.plan(_as(catch_up, "draft_extend"))
        assert backend.extend.extended_tokens == 9
        backend.plan(_as(catch_up, "decode", draft_step=0))
        assert backend.extend.extended_tokens == 9
