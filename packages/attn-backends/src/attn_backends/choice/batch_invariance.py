"""Which attention kernels are batch-invariant, and why the others are not.

A kernel is batch-invariant when a query row's output is a function of that row's query, its
request's keys and values and its key count alone: bitwise the same alone or in any batch, at any
position, at any thread count, and whether the row is a decode, a prompt token, or a prompt token
over a cached prefix. Deterministic inference (`enable_deterministic_inference`) builds only such
kernels, for both halves, since a token prefilled once and recomputed after a retraction (or served
from the prefix cache) must give the keys a decode would have given.
"""

from __future__ import annotations

from config_bags.server import BATCH_INVARIANT_KERNELS, AttentionKernelName

# BATCH_INVARIANT_KERNELS (config-bags, since the resolution of an unset leaf reads it) holds
# cpu_paged: every row through one kernel whose key ranges and blocks are fixed by position
# (paged_attention_kernel.cpp's header), merged in position order.

_WHY_NOT: dict[AttentionKernelName, str] = {
    "torch_native": (
        "its prompts run one SDPA per request and its decodes a batched matmul, which reduce a token's keys differently"
    ),
    "triton": "its extend and decode kernels tile a token's keys differently",
    "flashinfer": "its decode plan splits keys by the batch's size",
}


def batch_invariance_refusal(kernel: AttentionKernelName) -> str | None:
    """Why `kernel` cannot serve deterministic inference, naming what can; None when it is batch-invariant."""
    if kernel in BATCH_INVARIANT_KERNELS:
        return None
    return (
        f"{kernel} is not batch-invariant ({_WHY_NOT[kernel]}); deterministic inference builds "
        f"{', '.join(BATCH_INVARIANT_KERNELS)} for both halves, on a CPU"
    )
