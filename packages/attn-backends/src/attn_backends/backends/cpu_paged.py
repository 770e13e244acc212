"""cpu_paged: every query row of a forward through one call of the C++ paged-attention kernel.

A decode row sees all of its request's keys; the i-th new token of a prompt with `prefix` cached
sees prefix + i + 1 of them, which is causal attention, so one kernel call serves decodes, prompts
and mixed batches alike, reading keys and values where they lie in the pool
(paged_attention_kernel). CPU only. `auto` on a CPU builds it for the decode half: for prompts its
fp32 rounding differs from the SDPA rounding transformers shares (torch_native's docstring tells
the case where that changes an answer).
"""

from __future__ import annotations

import torch

from attn_backends.backend import AttentionBackend
from attn_backends.kernels.native_attention import NativeAttention
from attn_backends.kernels.paged_attention_kernel import (
    NativePagedAttention,
    PagedQueries,
    native_paged_attention,
    paged_attention,
    paged_queries,
)
from attn_backends.metadata import AttentionMetadataView


class CpuPagedBackend(AttentionBackend):
    """Attention of every row of the forward through the CPU paged-attention kernel."""

    def __init__(self) -> None:
        self._queries: PagedQueries | None = None
        self._native: NativePagedAttention | None = None  # the last native entry, alive until the next plan

    def plan(self, metadata: AttentionMetadataView) -> None:
        """Each query row's request, batch row and visible key count (one host pass per forward)."""
        if metadata.page_table.device.type != "cpu":
            raise RuntimeError(
                f"cpu_paged runs on a CPU only; this forward is on {metadata.page_table.device}: "
                "use triton, flashinfer or torch_native there"
            )
        extend_lens: list[int] = metadata.extend_lens.tolist()
        prefix_lens: list[int] = metadata.prefix_lens.tolist()
        requests: list[int] = []
        seq_lens: list[int] = []
        for r, (prefix, length) in enumerate(zip(prefix_lens, extend_lens, strict=True)):
            requests += [r] * length
            seq_lens += range(prefix + 1, prefix + length + 1)
        self._native = None
        self._queries = paged_queries(
            requests,
            list(range(metadata.num_tokens)),
            seq_lens,
            page_table=metadata.page_table,
            page_size=metadata.page_size,
            num_tokens=metadata.num_tokens,
        )

    def attend(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, *, scale: float) -> torch.Tensor:
        """Attention of the planned forward for one layer, rows in batch order."""
        if self._queries is None:
            raise RuntimeError("attend() was called before plan(); plan each forward first")
        return paged_attention(q, k_cache, v_cache, self._queries, scale)

    def native_attention(self, dtype: torch.dtype, kv_dtype: torch.dtype) -> NativeAttention | None:
        """The planned forward's rows through the kernel's native entry (the same template `attend` runs)."""
        if self._queries is None:
            raise RuntimeError("native_attention() was called before plan(); plan each forward first")
        self._native = native_paged_attention(self._queries, dtype, kv_dtype)
        return self._native.native
