"""What both Triton kernel families of the linear-attention layers share at launch: whether they
run in Triton's interpreter, read once when this module is imported (the kernel modules import it
before they decorate their kernels, which is when Triton reads the knob), the check that a pool
they write in place is contiguous, and the block side a `tl.dot` operand needs."""

from __future__ import annotations

import torch
import triton

INTERPRETED: bool = bool(triton.knobs.runtime.interpret)


def check_pool(pool: torch.Tensor, name: str) -> None:
    """The kernels address a pool row-major and write it in place: it cannot be a strided view."""
    if not pool.is_contiguous():
        raise ValueError(
            f"the triton kernels write {name} in place and address it row-major: pass a contiguous "
            f"pool (this one has strides {pool.stride()}), or use torch_native"
        )


def pow2_at_least_16(n: int) -> int:
    """The power of two >= n, at least 16 (a tl.dot operand's smallest side)."""
    return max(16, 1 << max(n - 1, 0).bit_length())
