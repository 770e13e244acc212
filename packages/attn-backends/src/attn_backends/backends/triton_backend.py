"""triton: attention over the paged pool through the Triton kernels of triton_kernels.

`plan` picks one kernel for the whole forward: the decode kernel when every request has one new
token (max_extend_len == 1; this path reads no tensor on the host, so it needs no device sync),
else the extend kernel for every token of the batch, mixed batches included (a one-token request
is then a block of one row). For an extend it cuts each request's new tokens into blocks of
EXTEND_BLOCK_M and sends the block list ([blocks, 4] int32: request, first batch row, first
position, token count) to the device once; every layer's `attend` reuses it.

Triton itself is imported by triton_kernels, which this module imports at its top: whoever
imports this module (the registry, lazily) needs Triton. The kernels walk keys in blocks of whole
pages (a page is one `tl.arange(0, page_size)` tile), so `attend` refuses a page size that is not
a power of two; tiling and the reasons for it are in triton_kernels' docstring.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attn_backends.backend import AttentionBackend
from attn_backends.kernels.triton_kernels import EXTEND_BLOCK_M, INTERPRETED, launch_decode, launch_extend
from attn_backends.metadata import AttentionMetadataView


@dataclass(frozen=True)
class DecodeLaunch:
    """A forward of one new token per request."""

    page_size: int
    page_table: torch.Tensor  # [requests, pages] int64, contiguous
    seq_lens: torch.Tensor  # [requests] int64: keys of each request, its new token's included


@dataclass(frozen=True)
class ExtendLaunch:
    """A forward with some request of several new tokens."""

    page_size: int
    page_table: torch.Tensor  # [requests, pages] int64, contiguous
    blocks: torch.Tensor  # [blocks, 4] int32: request, first batch row, first position, token count
    num_tokens: int


class TritonBackend(AttentionBackend):
    """Attention through Triton kernels: one decode kernel for all-decode batches, one extend kernel otherwise."""

    def __init__(self) -> None:
        self._plan: DecodeLaunch | ExtendLaunch | None = None

    def plan(self, metadata: AttentionMetadataView) -> None:
        """Choose the kernel of this forward and build what it reads."""
        page_table = metadata.page_table
        if page_table.device.type == "cpu" and not INTERPRETED:
            raise RuntimeError(
                "triton runs on a CPU only under TRITON_INTERPRET=1 (set before import); "
                "on a CPU use torch_native or cpu_paged"
            )
        table = page_table.contiguous()
        if metadata.max_extend_len == 1:
            self._plan = DecodeLaunch(metadata.page_size, table, metadata.seq_lens.contiguous())
            return
        blocks = _extend_blocks(metadata.extend_lens.tolist(), metadata.prefix_lens.tolist())
        self._plan = ExtendLaunch(metadata.page_size, table, blocks.to(page_table.device), metadata.num_tokens)

    def attend(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, *, scale: float) -> torch.Tensor:
        """Attention of the planned forward for one layer."""
        plan = self._plan
        if plan is None:
            raise RuntimeError("attend() was called before plan(); plan each forward first")
        if isinstance(plan, DecodeLaunch):
            if q.shape[0] != plan.seq_lens.shape[0]:
                raise ValueError(f"q has {q.shape[0]} tokens; the planned decode has {plan.seq_lens.shape[0]} requests")
            return launch_decode(q, k_cache, v_cache, plan.page_table, plan.seq_lens, plan.page_size, scale)
        if q.shape[0] != plan.num_tokens:
            raise ValueError(f"q has {q.shape[0]} tokens; the planned forward has {plan.num_tokens}")
        return launch_extend(q, k_cache, v_cache, plan.page_table, plan.blocks, plan.page_size, scale)


def _extend_blocks(extend_lens: list[int], prefix_lens: list[int]) -> torch.Tensor:
    """Each request's new tokens in blocks of at most EXTEND_BLOCK_M: [blocks, 4] int32 on the host."""
    blocks, row = [], 0
    for request, (length, prefix) in enumerate(zip(extend_lens, prefix_lens, strict=True)):
        for offset in range(0, length, EXTEND_BLOCK_M):
            blocks.append((request, row + offset, prefix + offset, min(EXTEND_BLOCK_M, length - offset)))
        row += length
    return torch.tensor(blocks, dtype=torch.int32).reshape(-1, 4)
