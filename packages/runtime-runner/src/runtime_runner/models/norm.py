"""RMS normalization, as the Llama family defines it, alone or after a residual add; and the gated
norm of a Gated-DeltaNet layer's output."""

from __future__ import annotations

import torch

from runtime_runner.kernels import cpu_fused_ops
from runtime_runner.models.whole_vectors import in_whole_vectors


def _rms_norm_torch(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    normed = x.float()
    normed = normed * torch.rsqrt(normed.pow(2).mean(-1, keepdim=True) + eps)
    return weight * normed.to(x.dtype)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """weight * x / rms(x) over the last dim, rounded as transformers rounds: the statistics in
    fp32, the normalized x rounded to x's dtype, then the weight multiply."""
    if cpu_fused_ops.handles(x, weight):
        return cpu_fused_ops.add_rms_norm(x, None, weight, eps)[1]
    return _rms_norm_torch(x, weight, eps)


def add_rms_norm(
    x: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(s, rms_norm(s)) with s = x + delta: a residual add and the norm that reads it, in one pass on a CPU."""
    if cpu_fused_ops.handles(x, delta, weight):
        return cpu_fused_ops.add_rms_norm(x, delta, weight, eps)
    summed = x + delta
    return summed, _rms_norm_torch(summed, weight, eps)


def gated_rms_norm(x: torch.Tensor, gate: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """A Gated-DeltaNet layer's output norm over the last dim: rms_norm(x) * silu(gate), the norm's
    plain weight multiplied before the gate and the product rounded once at the end, as
    transformers' Qwen3-Next gated norm rounds."""
    normed = x.float()
    normed = weight * (normed * torch.rsqrt(normed.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)
    return (normed * in_whole_vectors(torch.nn.functional.silu, gate.float())).to(x.dtype)
