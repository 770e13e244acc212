"""How the one-token requests (decodes) of a forward lay out their keys for grouped attention.

Keys are gathered whole pages at a time into chunks of equal length (a whole number of pages), one
batched matmul item per (KV head, chunk). Two layouts:

- padded: one chunk per request, as long as the longest request. The fewest ops; the layout when
  lengths are alike (every batch of one request, and equal-length batches).
- chunked: each request takes only the chunks its own length needs (about CHUNK_KEYS keys each), so
  a batch with spread lengths gathers and multiplies close to its real keys rather than
  requests x the longest (at 32 requests of 100-420 keys, 30% fewer). The small score tensor is
  then laid out as a [requests, max_chunks * chunk] grid for one softmax per request; one spare,
  fully masked chunk fills the cells of requests with fewer chunks than the longest. Values are
  not gathered: each request's keys are one run of `key_slots`, summed under their weights
  straight from the pool.

The plan picks whichever gathers fewer keys once the chunked layout's extra ops are counted.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

# Keys per chunk: at decode shapes the batched matmuls cost the same per key from 64-key chunks
# up, and 32-key chunks were slower; shorter chunks waste fewer keys at each request's end.
CHUNK_KEYS = 64
# Per key the two layouts cost about the same (bf16, CPU, cold pools: ~0.2 us per key at 32
# requests); the chunked layout's extra index ops are paid back by its single pass over the values.
# This margin keeps the padded layout where the two are within measurement noise.
CHUNKED_OVERHEAD_KEYS = 512


@dataclass(frozen=True)
class DecodeGroup:
    """The decodes of a forward: where their keys are and how their scores are laid out."""

    token_rows: torch.Tensor | None  # [requests]: their tokens' rows in the batch (None: the whole batch, in order)
    page_size: int  # slots per page (the gather unit)
    pages: torch.Tensor  # [chunks, pages_per_chunk]: pool page gathered into each chunk (page 0 past the end)
    key_bias: (
        torch.Tensor | None
    )  # [chunks, 1, chunk] fp32: 0 on a request's keys, -inf past its end (None: all keys real)
    chunk_request: torch.Tensor | None  # [chunks]: request of each chunk (None: chunk r is request r's only chunk)
    grid: torch.Tensor | None  # [requests, max_chunks]: chunk of each request's j-th cell; the spare chunk past its own
    grid_cell: torch.Tensor | None  # [real chunks]: each real chunk's flat cell in `grid`
    key_slots: torch.Tensor | None  # [real chunks * chunk]: pool slot of each key of the real chunks (0 past the end)
    request_first_key: torch.Tensor | None  # [requests]: offset of each request's first key in key_slots
    pooled: bool  # gather into the backend's kept workspace (False: fresh tensors, traceable)


def pages_per_chunk_of(page_size: int) -> int:
    """Whole pages per chunk of the chunked layout: as close to CHUNK_KEYS keys as pages allow."""
    return max(1, round(CHUNK_KEYS / page_size))


def decode_group(
    page_size: int, page_table: torch.Tensor, seq_lens: list[int], token_rows: torch.Tensor | None
) -> DecodeGroup:
    """The cheaper layout for decodes whose pages are the rows of `page_table`, of `seq_lens` keys each."""
    if len(seq_lens) != page_table.shape[0] or min(seq_lens, default=0) < 1:
        raise ValueError(
            f"decode_group needs one length >= 1 per page-table row; got {len(seq_lens)} lengths "
            f"(min {min(seq_lens, default=0)}) for {page_table.shape[0]} rows"
        )
    chunk = pages_per_chunk_of(page_size) * page_size
    chunked_keys = (sum(-(-n // chunk) for n in seq_lens) + 1) * chunk
    padded_keys = len(seq_lens) * -(-max(seq_lens) // page_size) * page_size
    if len(seq_lens) > 1 and chunked_keys + CHUNKED_OVERHEAD_KEYS < padded_keys:
        return chunked_decode_group(page_size, page_table, seq_lens, token_rows)
    return padded_decode_group(page_size, page_table, seq_lens, token_rows)


def padded_decode_group(
    page_size: int, page_table: torch.Tensor, seq_lens: list[int], token_rows: torch.Tensor | None
) -> DecodeGroup:
    """One chunk per request, all as long as the longest; keys past a request's end masked.

    A lone request gathers exactly its own keys slot by slot: nothing to mask, and the same shape of
    plan at every length, so the one-request step the runner traces compiles once.
    """
    device = page_table.device
    pages_each = -(-max(seq_lens) // page_size)
    if page_table.shape[1] < pages_each:
        raise ValueError(
            f"page table has {page_table.shape[1]} pages per row; {max(seq_lens)} keys need {pages_each} of {page_size}"
        )
    if len(seq_lens) == 1:
        in_page = torch.arange(page_size, device=device)
        slots = (page_table[0, :pages_each, None] * page_size + in_page).view(-1)[: seq_lens[0]]
        return DecodeGroup(token_rows, 1, slots[None, :], None, None, None, None, None, None, pooled=False)
    bias = None
    if min(seq_lens) < pages_each * page_size:
        key_pos = torch.arange(pages_each * page_size, device=device)
        lens = torch.tensor(seq_lens, device=device)
        bias = _bias_of(key_pos[None, :] < lens[:, None])
    return DecodeGroup(
        token_rows,
        page_size,
        page_table[:, :pages_each].contiguous(),
        bias,
        None,
        None,
        None,
        None,
        None,
        pooled=len(seq_lens) > 1,
    )


def chunked_decode_group(
    page_size: int, page_table: torch.Tensor, seq_lens: list[int], token_rows: torch.Tensor | None
) -> DecodeGroup:
    """Each request in as many chunks as its own length needs, plus one spare, fully masked chunk."""
    device = page_table.device
    pages_per_chunk = pages_per_chunk_of(page_size)
    chunk = pages_per_chunk * page_size
    counts = [-(-n // chunk) for n in seq_lens]
    chunks, max_chunks = sum(counts), max(counts)
    if page_table.shape[1] * page_size < max(seq_lens):
        raise ValueError(
            f"page table has {page_table.shape[1]} pages per row; {max(seq_lens)} keys need more of {page_size}"
        )
    requests = torch.arange(len(seq_lens), device=device)
    counts_t = torch.tensor(counts, device=device)
    first = torch.cumsum(counts_t, 0) - counts_t
    chunk_request = torch.repeat_interleave(requests, counts_t, output_size=chunks)
    in_request = torch.arange(chunks, device=device) - first[chunk_request]  # chunk's index within its request
    page_pos = in_request[:, None] * pages_per_chunk + torch.arange(pages_per_chunk, device=device)
    own_pages = (torch.tensor(seq_lens, device=device) + page_size - 1) // page_size
    looked_up = page_table[chunk_request[:, None], page_pos.clamp(max=page_table.shape[1] - 1)]
    pages = torch.where(page_pos < own_pages[chunk_request][:, None], looked_up, 0)
    key_pos = in_request[:, None] * chunk + torch.arange(chunk, device=device)
    real = key_pos < torch.tensor(seq_lens, device=device)[chunk_request][:, None]
    spare = chunks  # index of the fully masked chunk appended after the real ones
    cell_j = torch.arange(max_chunks, device=device)
    grid = torch.where(cell_j[None, :] < counts_t[:, None], first[:, None] + cell_j[None, :], spare)
    in_page = torch.arange(page_size, device=device)
    return DecodeGroup(
        token_rows,
        page_size,
        torch.cat([pages, pages.new_zeros(1, pages_per_chunk)]),
        _bias_of(torch.cat([real, real.new_zeros(1, chunk)])),
        torch.cat([chunk_request, chunk_request.new_zeros(1)]),
        grid,
        chunk_request * max_chunks + in_request,
        (pages[:, :, None] * page_size + in_page).view(-1),
        first * chunk,
        pooled=True,
    )


def _bias_of(real: torch.Tensor) -> torch.Tensor:
    """[chunks, 1, chunk] fp32 additive mask of `real` [chunks, chunk]: 0 where real, -inf elsewhere."""
    return torch.where(real, 0.0, float("-inf"))[:, None, :]
