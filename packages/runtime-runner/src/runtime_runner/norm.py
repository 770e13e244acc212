"""RMS normalization computed in fp32, as the Llama family defines it."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """weight * normalize(x) with the statistics in fp32 and the result in x's dtype.

    (torch's own rms_norm on bf16 input goes through a slower composite path on CPU.)"""
    return weight * F.rms_norm(x.float(), (x.shape[-1],), eps=eps).to(x.dtype)
