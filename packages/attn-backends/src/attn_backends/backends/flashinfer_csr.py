"""One forward's pages as the CSR arrays flashinfer's batch wrappers plan over.

flashinfer describes a batch by offsets into flat arrays: request r's queries are rows
qo_indptr[r]..qo_indptr[r+1] of q, its pages are kv_indices[kv_indptr[r]..kv_indptr[r+1]], and
its last page holds kv_last_page_len[r] keys (1..page_size), so its key count is
(pages - 1) * page_size + last_page_len. Pure torch: nothing here imports flashinfer.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attn_backends.metadata import AttentionMetadataView


@dataclass(frozen=True)
class PagedCsr:
    """The CSR arrays of one forward, int32 on the metadata's device."""

    qo_indptr: torch.Tensor  # [requests + 1]: first query row of each request, then the total
    kv_indptr: torch.Tensor  # [requests + 1]: first entry of each request in kv_indices, then the total
    kv_indices: torch.Tensor  # [total pages]: each request's first ceil(seq_len / page_size) pages, concatenated
    kv_last_page_len: torch.Tensor  # [requests]: keys in each request's last page, 1..page_size


def paged_csr_of(metadata: AttentionMetadataView) -> PagedCsr:
    """The CSR arrays of `metadata`'s forward.

    Raises ValueError when the page table is narrower than a request's pages, or when a request
    extends by more tokens than its sequence holds (its causal offset seq - extend would be negative).
    """
    page_size, page_table = metadata.page_size, metadata.page_table
    seq_lens, extend_lens = metadata.seq_lens, metadata.extend_lens
    device = page_table.device
    pages = (seq_lens + page_size - 1) // page_size
    # One host read for both checks: plan runs once per forward, and flashinfer's own plan reads
    # the indptr arrays on the host anyway.
    most_pages, least_prefix = torch.stack([pages.max(), (seq_lens - extend_lens).min()]).tolist()
    if most_pages > page_table.shape[1]:
        raise ValueError(
            f"the page table has {page_table.shape[1]} columns but a request of this forward needs {most_pages} "
            f"pages (seq_lens {seq_lens.tolist()}, page size {page_size}); the runner must pass each request's pages"
        )
    if least_prefix < 0:
        raise ValueError(
            f"a request extends by more tokens than its sequence holds (seq_lens {seq_lens.tolist()}, "
            f"extend_lens {extend_lens.tolist()}); seq_lens must be prefix_lens + extend_lens"
        )
    in_use = torch.arange(page_table.shape[1], device=device)[None, :] < pages[:, None]
    return PagedCsr(
        qo_indptr=_indptr(extend_lens),
        kv_indptr=_indptr(pages),
        # Boolean indexing walks rows in order, so the pages come out request after request.
        kv_indices=page_table[in_use].to(torch.int32),
        kv_last_page_len=((seq_lens - 1) % page_size + 1).to(torch.int32),
    )


def _indptr(counts: torch.Tensor) -> torch.Tensor:
    """[0, c0, c0 + c1, ...] as int32: the offsets of consecutive runs of `counts` items."""
    out = torch.zeros(counts.shape[0] + 1, dtype=torch.int32, device=counts.device)
    out[1:] = counts.cumsum(0)
    return out
