"""The linear-attention kernels a hybrid model's Gated-DeltaNet layers run on, chosen by name.

    kernels = linear_attn_kernels_for("triton", device_type="cuda")
    y = kernels.causal_conv_prefill(x, weight, bias, cu_seqlens, conv_state, slots, has_initial)
    out = kernels.gated_delta_prefill(q, k, v, g, beta, cu_seqlens, state, slots, has_initial)

`torch_native` is pure torch on any device (gated_delta_rule.py, causal_conv_state.py); `cpu_fused`
(gated_delta_cpu.py) is the same six entry points as C++ passes, on a CPU only; `triton`
(gated_delta_triton.py, causal_conv_triton.py) runs on CUDA, and on a CPU only in Triton's
interpreter (TRITON_INTERPRET=1, for tests); `flashinfer` is a name the operator may give but
this build has no kernels for it. The set's `name` is the kernels it holds: the caller stamps it
on its runner, never on the config.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Protocol, get_args

import torch

from attn_backends.choice.effective_names import UnknownAttentionBackendError
from attn_backends.choice.registry import AttentionBackendUnavailableError
from attn_backends.linear import causal_conv_state, gated_delta_cpu, gated_delta_rule
from config_bags.server.bags.attention_names import LinearAttnBackendName


class GatedDeltaPrefill(Protocol):
    """gated_delta_rule.gated_delta_prefill's signature: out [T, H, Dv]; final states into state[slots]."""

    def __call__(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        g: torch.Tensor,
        beta: torch.Tensor,
        cu_seqlens: torch.Tensor,
        state: torch.Tensor,
        slots: torch.Tensor,
        has_initial: torch.Tensor,
    ) -> torch.Tensor: ...


class GatedDeltaDecode(Protocol):
    """gated_delta_rule.gated_delta_decode's signature: out [B, H, Dv]; state[slots] stepped in place."""

    def __call__(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        g: torch.Tensor,
        beta: torch.Tensor,
        state: torch.Tensor,
        slots: torch.Tensor,
    ) -> torch.Tensor: ...


class GatedDeltaVerify(Protocol):
    """gated_delta_rule.gated_delta_verify's signature: (out [T, H, Dv], states after each token [T, H, Dk, Dv])."""

    def __call__(
        self,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        g: torch.Tensor,
        beta: torch.Tensor,
        cu_seqlens: torch.Tensor,
        state: torch.Tensor,
        slots: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]: ...


class CausalConvPrefill(Protocol):
    """causal_conv_state.causal_conv_prefill's signature: y [T, C]; last W-1 inputs into conv_state[slots]."""

    def __call__(
        self,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        cu_seqlens: torch.Tensor,
        conv_state: torch.Tensor,
        slots: torch.Tensor,
        has_initial: torch.Tensor,
    ) -> torch.Tensor: ...


class CausalConvDecode(Protocol):
    """causal_conv_state.causal_conv_decode's signature: y [B, C]; conv_state[slots] shifted in place."""

    def __call__(
        self,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        conv_state: torch.Tensor,
        slots: torch.Tensor,
    ) -> torch.Tensor: ...


class CausalConvVerify(Protocol):
    """causal_conv_state.causal_conv_verify's signature: (y [T, C], conv states after each token [T, C, W-1])."""

    def __call__(
        self,
        x: torch.Tensor,
        weight: torch.Tensor,
        bias: torch.Tensor | None,
        cu_seqlens: torch.Tensor,
        conv_state: torch.Tensor,
        slots: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]: ...


@dataclass(frozen=True)
class LinearAttnKernels:
    """One implementation of the six linear-attention entry points, and the name it answers to."""

    name: LinearAttnBackendName
    gated_delta_prefill: GatedDeltaPrefill
    gated_delta_decode: GatedDeltaDecode
    gated_delta_verify: GatedDeltaVerify
    causal_conv_prefill: CausalConvPrefill
    causal_conv_decode: CausalConvDecode
    causal_conv_verify: CausalConvVerify


TORCH_NATIVE_KERNELS = LinearAttnKernels(
    name="torch_native",
    gated_delta_prefill=gated_delta_rule.gated_delta_prefill,
    gated_delta_decode=gated_delta_rule.gated_delta_decode,
    gated_delta_verify=gated_delta_rule.gated_delta_verify,
    causal_conv_prefill=causal_conv_state.causal_conv_prefill,
    causal_conv_decode=causal_conv_state.causal_conv_decode,
    causal_conv_verify=causal_conv_state.causal_conv_verify,
)

CPU_FUSED_KERNELS = LinearAttnKernels(
    name="cpu_fused",
    gated_delta_prefill=gated_delta_cpu.gated_delta_prefill,
    gated_delta_decode=gated_delta_cpu.gated_delta_decode,
    gated_delta_verify=gated_delta_cpu.gated_delta_verify,
    causal_conv_prefill=gated_delta_cpu.causal_conv_prefill,
    causal_conv_decode=gated_delta_cpu.causal_conv_decode,
    causal_conv_verify=gated_delta_cpu.causal_conv_verify,
)


def linear_attn_kernels_for(name: LinearAttnBackendName, device_type: str) -> LinearAttnKernels:
    """The kernels `name` names, for tensors on a `device_type` device. Refuses (with
    AttentionBackendUnavailableError, naming what would run) cpu_fused off a CPU, triton off CUDA
    unless a CPU runs Triton's interpreter, and flashinfer, whose linear-attention kernels this
    build lacks; refuses any other name with UnknownAttentionBackendError (a ValueError) listing
    the accepted ones. Triton is imported only when its kernels are asked for; cpu_fused's C++ is
    compiled on its first call, not here."""
    if name == "torch_native":
        return TORCH_NATIVE_KERNELS
    if name == "cpu_fused":
        return _cpu_fused_kernels(device_type)
    if name == "triton":
        return _triton_kernels(device_type)
    if name == "flashinfer":
        raise AttentionBackendUnavailableError(
            "linear-attention backend 'flashinfer' is unavailable: this build lacks flashinfer's linear-attention "
            "kernels; use triton or torch_native"
        )
    raise UnknownAttentionBackendError(
        f"linear-attention backend {name!r} is not one of {', '.join(get_args(LinearAttnBackendName))}"
    )


def _cpu_fused_kernels(device_type: str) -> LinearAttnKernels:
    if device_type != "cpu":
        raise AttentionBackendUnavailableError(
            f"linear-attention backend 'cpu_fused' runs on a CPU, not on {device_type}; there use "
            f"{'triton or torch_native' if device_type == 'cuda' else 'torch_native'}"
        )
    return CPU_FUSED_KERNELS


def _triton_kernels(device_type: str) -> LinearAttnKernels:
    if device_type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise AttentionBackendUnavailableError(
            "linear-attention backend 'triton' runs on a CPU only under TRITON_INTERPRET=1 (its interpreter, for "
            "tests); on a CPU use torch_native"
        )
    if device_type not in ("cuda", "cpu"):
        raise AttentionBackendUnavailableError(
            f"linear-attention backend 'triton' runs on CUDA devices (or a CPU under TRITON_INTERPRET=1), not on "
            f"{device_type}; there use torch_native"
        )
    from attn_backends.linear import causal_conv_triton, gated_delta_triton, triton_launch

    if device_type == "cpu" and not triton_launch.INTERPRETED:
        raise AttentionBackendUnavailableError(
            "linear-attention backend 'triton' on a CPU needs its kernels interpreted, but they were compiled: "
            "TRITON_INTERPRET=1 was set after attn_backends.linear.triton_launch was imported; set it before, "
            "or use torch_native"
        )
    return LinearAttnKernels(
        name="triton",
        gated_delta_prefill=gated_delta_triton.gated_delta_prefill,
        gated_delta_decode=gated_delta_triton.gated_delta_decode,
        gated_delta_verify=gated_delta_triton.gated_delta_verify,
        causal_conv_prefill=causal_conv_triton.causal_conv_prefill,
        causal_conv_decode=causal_conv_triton.causal_conv_decode,
        causal_conv_verify=causal_conv_triton.causal_conv_verify,
    )
