"""RMS normalization, as the Llama family defines it."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """weight * x / rms(x) in one fused op; torch keeps the statistics in fp32 for bf16/fp16 input.

    (transformers rounds to the input dtype before the weight multiply; this rounds once, after.)"""
    return F.rms_norm(x, (x.shape[-1],), weight, eps)
