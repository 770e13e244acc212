"""linear_attn_kernels_for answers the six entry points of the named kernels, stamped with that
name, and refuses with a reason and the alternatives: triton on a CPU outside Triton's
interpreter (or interpreted kernels that were compiled instead), triton off CUDA, flashinfer
(this build has no linear-attention kernels of it) and any other name.
"""

from __future__ import annotations

import dataclasses

import pytest

from attn_backends import AttentionBackendUnavailableError, UnknownAttentionBackendError
from attn_backends.linear import (
    causal_conv_state,
    causal_conv_triton,
    gated_delta_rule,
    gated_delta_triton,
    triton_launch,
)
from attn_backends.linear.kernels import LinearAttnKernels, linear_attn_kernels_for

ENTRY_POINTS = (
    "gated_delta_prefill",
    "gated_delta_decode",
    "gated_delta_verify",
    "causal_conv_prefill",
    "causal_conv_decode",
    "causal_conv_verify",
)


def test_torch_native_holds_the_torch_functions() -> None:
    kernels = linear_attn_kernels_for("torch_native", "cpu")
    assert kernels.name == "torch_native"
    for entry in ENTRY_POINTS:
        module = gated_delta_rule if entry.startswith("gated") else causal_conv_state
        assert getattr(kernels, entry) is getattr(module, entry)
    assert linear_attn_kernels_for("torch_native", "cuda") == kernels
    with pytest.raises(dataclasses.FrozenInstanceError):
        kernels.name = "triton"  # type: ignore[misc]


def test_triton_holds_the_triton_functions(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(triton_launch, "INTERPRETED", True)
    for device_type in ("cpu", "cuda"):
        kernels = linear_attn_kernels_for("triton", device_type)
        assert isinstance(kernels, LinearAttnKernels) and kernels.name == "triton"
        for entry in ENTRY_POINTS:
            family = gated_delta_triton if entry.startswith("gated_delta") else causal_conv_triton
            assert getattr(kernels, entry) is getattr(family, entry)


def test_triton_on_a_cpu_needs_the_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(AttentionBackendUnavailableError, match="only under TRITON_INTERPRET=1.*use torch_native"):
        linear_attn_kernels_for("triton", "cpu")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(triton_launch, "INTERPRETED", False)
    with pytest.raises(
        AttentionBackendUnavailableError, match="set after attn_backends.linear.triton_launch was imported"
    ):
        linear_attn_kernels_for("triton", "cpu")


def test_refusals_name_what_would_run() -> None:
    with pytest.raises(AttentionBackendUnavailableError, match="not on mps; there use torch_native"):
        linear_attn_kernels_for("triton", "mps")
    with pytest.raises(
        AttentionBackendUnavailableError,
        match="this build lacks flashinfer's linear-attention kernels; use triton or torch_native",
    ):
        linear_attn_kernels_for("flashinfer", "cuda")
    with pytest.raises(
        UnknownAttentionBackendError, match="'fla' is not one of torch_native, cpu_fused, triton, flashinfer"
    ):
        linear_attn_kernels_for("fla", "cuda")  # type: ignore[arg-type]
