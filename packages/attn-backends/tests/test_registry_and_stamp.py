"""The factory answers (effective_name, backend) with the kernel it built; the pair stamps its
products (a hybrid container's children each with its own name); the container selects its half
by forward mode exactly as `serving_attention_backend` answers; a wrapper carries the wrapped
backend's stamp; an unstamped backend says so when asked."""

from __future__ import annotations

import ast
import inspect
import math
import warnings
from collections.abc import Iterator
from typing import get_args

import pytest
import torch
from paged_reference import paged_tensors, scenario, was_planned

import attn_backends.choice.registry as registry_module
from attn_backends import (
    DEPRECATED_ALIASES,
    KERNEL_NAMES,
    REGISTRY,
    AttentionBackend,
    AttentionStamp,
    CpuPagedBackend,
    ForwardMode,
    HybridAttentionBackend,
    TorchNativeBackend,
    UnknownAttentionBackendError,
    UnstampedBackendError,
    WrapperBackend,
    auto_kernel_of,
    build_attention_backend,
    build_attention_pair,
    refusal_on,
    registered_attention_backends,
    serving_attention_backend,
    stamp_built,
)
from config_bags import publish, unpublish
from config_bags.server import Bags, ExecBag, KernelBag, SpecBag

MODES: tuple[ForwardMode, ...] = get_args(ForwardMode)


@pytest.fixture()
def published() -> Iterator[None]:
    publish(Bags(), role="standalone")
    yield
    unpublish()


def test_each_kernel_entry_answers_its_own_name() -> None:
    for kernel, cls in (("torch_native", TorchNativeBackend), ("cpu_paged", CpuPagedBackend)):
        for half in ("prefill", "decode"):
            name, backend = build_attention_backend(kernel, half=half, device_type="cpu", batch_invariant=False)
            assert name == kernel and isinstance(backend, cls)


def test_the_deprecated_alias_builds_its_target_and_warns_with_the_real_name() -> None:
    with pytest.warns(
        FutureWarning, match="'intel_amx' is a deprecated alias of 'cpu_paged'.*name 'cpu_paged' instead"
    ):
        name, backend = build_attention_backend("intel_amx", half="decode", device_type="cpu", batch_invariant=False)
    assert name == "cpu_paged" and isinstance(backend, CpuPagedBackend)


def test_auto_picks_per_host_and_half_and_answers_the_kernel() -> None:
    assert (
        build_attention_backend("auto", half="prefill", device_type="cpu", batch_invariant=False)[0] == "torch_native"
    )
    assert build_attention_backend("auto", half="decode", device_type="cpu", batch_invariant=False)[0] == "cpu_paged"
    assert auto_kernel_of("prefill", "cuda", batch_invariant=False) in ("flashinfer", "triton")


def test_no_registry_entry_answers_an_alias_or_auto() -> None:
    """The static guard: every entry, for each half, answers a kernel name (never its alias key,
    never auto), checked two ways. Building: every entry that can run on this CPU is called
    directly (not through the factory's own check). Reading: every kernel entry's function returns
    a tuple whose first element is the literal of its own key, so flashinfer, which cannot build
    here, is covered too.

    Reverse-verified: an alias entry answering `alias` instead of its target's name, and the
    torch_native entry answering "auto", each turned this test red."""
    assert set(registered_attention_backends()) == set(REGISTRY)
    for name, entry in REGISTRY.items():
        for half in ("prefill", "decode"):
            if name in KERNEL_NAMES and refusal_on(name, "cpu") is not None:
                continue
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", FutureWarning)
                effective, _ = entry(half, "cpu", False)
            assert effective in KERNEL_NAMES, (name, half, effective)
            if name in DEPRECATED_ALIASES:
                assert effective == DEPRECATED_ALIASES[name]
    for kernel in KERNEL_NAMES:
        source = inspect.getsource(REGISTRY[kernel])
        returns = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Return)]
        assert returns, kernel
        for node in returns:
            assert isinstance(node.value, ast.Tuple), (kernel, ast.unparse(node))
            first = node.value.elts[0]
            assert isinstance(first, ast.Constant) and first.value == kernel, (kernel, ast.unparse(node))
    assert inspect.getsourcefile(REGISTRY["torch_native"]) == registry_module.__file__


def test_unknown_name_lists_the_registered_ones() -> None:
    with pytest.raises(
        UnknownAttentionBackendError,
        match=r"'fa3' is not registered; registered: auto, cpu_paged, flashinfer, intel_amx, torch_native, triton",
    ):
        build_attention_backend("fa3", half="prefill", device_type="cpu", batch_invariant=False)


def test_unstamped_backend_raises_when_asked_for_its_name() -> None:
    """Reverse-verified: dropping the unstamped check in effective_name makes this test fail."""
    backend = TorchNativeBackend()
    with pytest.raises(UnstampedBackendError, match="TorchNativeBackend has no effective-name stamp"):
        _ = backend.effective_name
    backend.stamp("torch_native")
    assert backend.effective_name == "torch_native"
    backend.stamp("torch_native")
    with pytest.raises(ValueError, match="already stamped 'torch_native'"):
        backend.stamp("triton")
    assert backend.effective_name == "torch_native"


@pytest.mark.parametrize("name", ["auto", "intel_amx", "fa3", ""])
def test_a_stamp_is_a_kernel_name(name: str) -> None:
    """Reverse-verified: without the kernel-name check in stamp(), an alias, auto or a misspelling
    was stamped and answered as what runs."""
    backend = TorchNativeBackend()
    with pytest.raises(ValueError, match=f"cannot stamp TorchNativeBackend {name!r}: a stamp is a kernel name"):
        backend.stamp(name)
    with pytest.raises(UnstampedBackendError):
        _ = backend.effective_name


def test_the_pair_stamps_a_hybrid_containers_children_each_with_its_kernel() -> None:
    """auto on a CPU builds two kernels: a hybrid container whose children carry their own stamps.

    Reverse-verified: with the child-stamping loop in `stamp_built` removed, the children had no
    stamp (UnstampedBackendError here)."""
    stamp, backend = build_attention_pair("auto", "auto", device_type="cpu")
    assert stamp == AttentionStamp(prefill="torch_native", decode="cpu_paged", is_draft_override=False)
    assert isinstance(backend, HybridAttentionBackend)
    assert backend.child_for("prefill").effective_name == "torch_native"
    assert backend.child_for("decode").effective_name == "cpu_paged"
    assert backend.effective_name == "hybrid(prefill=torch_native, decode=cpu_paged)"
    with pytest.raises(AttributeError):
        stamp.prefill = "triton"  # type: ignore[misc]


def test_one_kernel_for_both_halves_is_one_stamped_backend() -> None:
    stamp, backend = build_attention_pair("torch_native", "auto", device_type="cpu")
    assert stamp == AttentionStamp("torch_native", "cpu_paged", False)
    with pytest.warns(FutureWarning, match="intel_amx"):
        stamp, backend = build_attention_pair("cpu_paged", "intel_amx", device_type="cpu")
    assert stamp == AttentionStamp("cpu_paged", "cpu_paged", False)
    assert isinstance(backend, CpuPagedBackend) and backend.effective_name == "cpu_paged"


def test_a_children_stamping_path_refuses_a_backend_without_children() -> None:
    """Reverse-verified: with the `if not children` check removed, a plain backend passed the
    children-stamping path unstamped (no TypeError)."""
    with pytest.raises(TypeError, match="stamps children .* but has no attn_backends children"):
        stamp_built(TorchNativeBackend(), ("torch_native",), stamps_children=True)
    with pytest.raises(TypeError, match="carries no stamp of its own"):
        stamp_built(
            HybridAttentionBackend(TorchNativeBackend(), CpuPagedBackend()), ("torch_native",), stamps_children=False
        )


@pytest.mark.parametrize("spec_mode", ["prefill", "decode"])
def test_the_container_selects_as_serving_attention_backend_answers(spec_mode: str) -> None:
    """Decode and idle go to the decode half, target verify by speculative_attention_mode, the
    rest (extend, mixed, draft extend) to the prefill half; the container's attention is the
    selected child's; `serving_attention_backend` names that child for every mode.

    Reverse-verified: sending draft_extend to the decode half in `dispatched_half_of` failed the
    draft_extend case; ignoring speculative_attention_mode failed target_verify with "decode"."""
    publish(Bags(spec=SpecBag(speculative_attention_mode=spec_mode)), role="standalone")  # type: ignore[arg-type]
    try:
        meta, _ = scenario([3, 0], [1, 1], 4, seed=1)
        q, k, v = paged_tensors(meta, heads=4, kv_heads=2, dim=8, dtype=torch.float32, seed=2)
        stamp, _ = build_attention_pair("auto", "auto", device_type="cpu")
        expected = {
            "decode": "decode",
            "idle": "decode",
            "extend": "prefill",
            "mixed": "prefill",
            "draft_extend": "prefill",
            "target_verify": spec_mode,
        }
        assert set(expected) == set(MODES)
        for mode in MODES:
            _, hybrid = build_attention_pair("auto", "auto", device_type="cpu")
            assert isinstance(hybrid, HybridAttentionBackend)
            hybrid.plan(type(meta)(**{**vars(meta), "forward_mode": mode}))
            selected = hybrid.child_for(expected[mode])  # type: ignore[arg-type]
            other = hybrid.child_for("prefill" if expected[mode] == "decode" else "decode")
            assert was_planned(selected, q, k, v) and not was_planned(other, q, k, v), mode
            torch.testing.assert_close(
                hybrid.attend(q, k, v, scale=1 / math.sqrt(8)), selected.attend(q, k, v, scale=1 / math.sqrt(8))
            )
            assert serving_attention_backend(mode, stamp) == selected.effective_name, mode
    finally:
        unpublish()


def test_without_a_stamp_the_configured_kernel_answers_and_auto_is_refused() -> None:
    publish(Bags(exec=ExecBag(kernel=KernelBag(prefill_attention_backend="torch_native"))), role="standalone")
    try:
        assert serving_attention_backend("extend", None) == "torch_native"
        with pytest.raises(ValueError, match="decode attention backend is configured as 'auto'.*runner's stamp"):
            serving_attention_backend("decode", None)
    finally:
        unpublish()


class _CountingWrapper(WrapperBackend):
    """A wrapper with a side job: it counts the forwards it planned."""

    def __init__(self, wrapped: AttentionBackend) -> None:
        super().__init__(wrapped)
        self.plans = 0

    def plan(self, metadata: object) -> None:  # type: ignore[override]
        self.plans += 1
        super().plan(metadata)  # type: ignore[arg-type]


def test_a_wrapper_carries_the_wrapped_backends_stamp(published: None) -> None:
    """Reverse-verified: without the stamp copy in WrapperBackend.__init__, the wrapper's
    effective_name raised UnstampedBackendError."""
    _, inner = build_attention_pair("cpu_paged", "cpu_paged", device_type="cpu")
    wrapper = _CountingWrapper(inner)
    assert wrapper.effective_name == "cpu_paged"
    meta, slots = scenario([2], [3], 1, seed=4)
    q, k, v = paged_tensors(meta, heads=2, kv_heads=1, dim=8, dtype=torch.float32, seed=5)
    wrapper.plan(meta)
    torch.testing.assert_close(wrapper.attend(q, k, v, scale=0.5), inner.attend(q, k, v, scale=0.5))
    assert wrapper.plans == 1
    with pytest.raises(UnstampedBackendError):
        _CountingWrapper(TorchNativeBackend())
