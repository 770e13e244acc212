"""Rotary position embeddings: inverse frequencies per scaling variant, and cos/sin tables.

The tables are computed once at load for every position up to the model's maximum, so a forward
only indexes them by position.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from runtime_runner.errors import UnsupportedConfigError
from runtime_runner.kernels import cpu_fused_ops
from runtime_runner.loading.arch_config import RopeSpec

SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3", "yarn")


def _base_inv_freq(theta: float, dim: int) -> torch.Tensor:
    return 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.int64).to(torch.float32) / dim))


def _required(spec: RopeSpec, name: str) -> float:
    value = spec.param(name)
    if value is None or isinstance(value, bool):
        raise UnsupportedConfigError(f"rope type {spec.rope_type!r} needs numeric parameter {name!r}; got {value!r}")
    return float(value)


def _llama3_inv_freq(spec: RopeSpec, dim: int) -> torch.Tensor:
    inv_freq = _base_inv_freq(spec.theta, dim)
    factor, low, high = (
        _required(spec, "factor"),
        _required(spec, "low_freq_factor"),
        _required(spec, "high_freq_factor"),
    )
    old_context = _required(spec, "original_max_position_embeddings")
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > old_context / low, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old_context / high) * ~(wavelen > old_context / low)
    return torch.where(medium, smoothed, scaled)


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn_inv_freq(spec: RopeSpec, dim: int, max_positions: int) -> tuple[torch.Tensor, float]:
    original = _required(spec, "original_max_position_embeddings")
    raw_factor = spec.param("factor")
    factor = float(raw_factor) if raw_factor is not None else max_positions / original
    attention_factor = spec.param("attention_factor")
    mscale, mscale_all = spec.param("mscale"), spec.param("mscale_all_dim")
    if attention_factor is None:
        if mscale and mscale_all:
            attention_factor = _yarn_mscale(factor, float(mscale)) / _yarn_mscale(factor, float(mscale_all))
        else:
            attention_factor = _yarn_mscale(factor)
    beta_fast = float(spec.param("beta_fast") or 32)
    beta_slow = float(spec.param("beta_slow") or 1)

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(original / (rotations * 2 * math.pi))) / (2 * math.log(spec.theta))

    low, high = correction_dim(beta_fast), correction_dim(beta_slow)
    truncate = spec.param("truncate")
    if truncate is None or truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    pos_freqs = spec.theta ** (torch.arange(0, dim, 2).to(torch.float32) / dim)
    extrapolation = 1 - ramp
    inv = (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation
    return inv, float(attention_factor)


def inv_freq_of(spec: RopeSpec, head_dim: int, max_positions: int) -> tuple[torch.Tensor, float]:
    """(inverse frequencies [head_dim/2] fp32, scale applied to cos and sin) of a rope variant."""
    if spec.rope_type == "default":
        return _base_inv_freq(spec.theta, head_dim), 1.0
    if spec.rope_type == "linear":
        return _base_inv_freq(spec.theta, head_dim) / _required(spec, "factor"), 1.0
    if spec.rope_type == "llama3":
        return _llama3_inv_freq(spec, head_dim), 1.0
    if spec.rope_type == "yarn":
        return _yarn_inv_freq(spec, head_dim, max_positions)
    raise UnsupportedConfigError(
        f"rope type {spec.rope_type!r} is not supported; supported: {', '.join(SUPPORTED_ROPE_TYPES)}"
    )


@dataclass(frozen=True)
class RopeTable:
    """cos and [-sin, sin] per position, [max_positions, head_dim], in the model dtype.

    The signed sin turns rotate-half into a roll: x*cos + roll(x, d/2)*signed_sin.
    """

    cos: torch.Tensor
    signed_sin: torch.Tensor

    @classmethod
    def build(
        cls, spec: RopeSpec, head_dim: int, max_positions: int, dtype: torch.dtype, device: torch.device
    ) -> RopeTable:
        """Tables for positions 0..max_positions-1."""
        inv_freq, scale = inv_freq_of(spec, head_dim, max_positions)
        freqs = torch.arange(max_positions, dtype=torch.float32)[:, None] * inv_freq[None, :]
        cos = freqs.cos() * scale
        sin = freqs.sin() * scale
        return cls(
            cos=torch.cat([cos, cos], -1).to(device=device, dtype=dtype),
            signed_sin=torch.cat([-sin, sin], -1).to(device=device, dtype=dtype),
        )


def apply_rope(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """x [tokens, heads, head_dim] rotated by per-token cos/signed_sin [tokens, head_dim]: in place
    on a CPU (x is returned), a new tensor otherwise; rounded as transformers' q*cos + rotate_half(q)*sin."""
    if cpu_fused_ops.handles(x, cos, signed_sin):
        return cpu_fused_ops.rope_(x, cos, signed_sin)
    return x * cos[:, None, :] + x.roll(x.shape[-1] // 2, -1) * signed_sin[:, None, :]
