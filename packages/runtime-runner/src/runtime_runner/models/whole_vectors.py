"""Element-wise functions whose result for an element does not depend on where it lies.

torch's CPU kernels for transcendental functions (exp, softplus, sigmoid, silu) run a vectorized
body and finish a tensor's last few elements with a scalar loop, and the two round differently.
Where an element lands (its request's rows, the rows batched before it) then changes its bits, so
a request's output would depend on its batch. Padding the flat input to whole vector blocks sends
every element through the vectorized body.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

_BLOCK = 64  # elements: a multiple of every CPU vector loop's block (2 x 16 fp32 lanes at most)


def in_whole_vectors(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> torch.Tensor:
    """`fn(x)` for an element-wise `fn`, computed over `x` flat, contiguous and padded to whole vector
    blocks (a strided input takes other loops); on another device `fn(x)` as it is."""
    if x.device.type != "cpu":
        return fn(x)
    flat = x.reshape(-1).contiguous()
    padded = torch.nn.functional.pad(flat, (0, -flat.numel() % _BLOCK))
    return fn(padded)[: flat.numel()].reshape(x.shape)
