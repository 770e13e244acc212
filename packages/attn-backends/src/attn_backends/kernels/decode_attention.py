"""Attention of one query token per request over its paged keys.

Scores are one batched matmul whose items are (KV head, chunk), the query heads sharing a KV head
as its rows; on CPU this beats SDPA several times over at decode shapes (SDPA's kernels are built
for many query rows). Scores stay in the compute dtype (bf16 matmuls run fastest on CPU); the
softmax accumulates in fp32 internally, as softmax does for reduced-precision inputs on CPU and
GPU. Values: a second batched matmul over gathered values in the padded layout; in the chunked
layout, embedding_bag sums them under their weights straight from the pool.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from attn_backends.kernels.decode_plan import DecodeGroup
from attn_backends.kernels.gather_workspace import GatherWorkspace


def decode_attention(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    group: DecodeGroup,
    scale: float,
    workspace: GatherWorkspace,
) -> torch.Tensor:
    """q [requests, heads, d] against each request's keys in the pool [kv_heads, slots, d]; answers
    [requests, heads, d]."""
    requests, heads, head_dim = q.shape
    kv_heads = k_cache.shape[0]
    per_kv = heads // kv_heads
    chunks = group.pages.shape[0]
    chunk = group.pages.shape[1] * group.page_size
    keys = _gathered(k_cache, group, workspace, 0)
    queries = q.reshape(requests, kv_heads, per_kv, head_dim).transpose(0, 1)
    if group.chunk_request is not None:
        queries = queries.index_select(1, group.chunk_request)
    queries = (queries * scale).reshape(kv_heads * chunks, per_kv, head_dim)
    scores = torch.bmm(queries, keys.transpose(1, 2))
    if group.key_bias is not None:
        # Added after the matmul, not through baddbmm: a bf16 baddbmm on a CPU without native bf16
        # (AVX2) runs one addmm per batch item, measured 3.7 s where bmm and an add take 15 ms.
        # The bias is 0 or -inf, so adding it rounds nothing.
        bias = group.key_bias.to(q.dtype).expand(kv_heads, -1, -1, -1).reshape(kv_heads * chunks, 1, chunk)
        scores = scores + bias
    grid, grid_cell, key_slots, first_key = group.grid, group.grid_cell, group.key_slots, group.request_first_key
    if grid is None or grid_cell is None or key_slots is None or first_key is None:
        weights = scores.softmax(-1)
        out = torch.bmm(weights, _gathered(v_cache, group, workspace, 1)).view(kv_heads, requests, per_kv, head_dim)
        return out.transpose(0, 1).reshape(requests, heads, head_dim)
    max_chunks = grid.shape[1]
    # Each request's chunks side by side, the spare masked chunk past its own: one softmax per row.
    per_request = scores.view(kv_heads, chunks, per_kv, chunk).transpose(1, 2).index_select(2, grid.view(-1))
    weights = per_request.view(kv_heads, per_kv, requests, max_chunks * chunk).softmax(-1)
    # Back to the real chunks in key_slots order: [kv, per_kv, keys]; a request's keys are one run.
    weights = weights.view(kv_heads, per_kv, requests * max_chunks, chunk).index_select(2, grid_cell)
    # Values are never gathered: embedding_bag reads each key's value row straight from the pool and
    # sums it under its weight (one pass, fp32 accumulation), one bag per (query head, request).
    keys_total = key_slots.shape[0]
    rows = key_slots.view(1, -1).expand(per_kv, -1).reshape(-1)
    bags = (torch.arange(per_kv, device=q.device)[:, None] * keys_total + first_key[None, :]).view(-1)
    per_head = [
        F.embedding_bag(rows, v_cache[h], bags, mode="sum", per_sample_weights=weights[h].reshape(-1))
        for h in range(kv_heads)
    ]
    return (
        torch.stack(per_head)
        .view(kv_heads, per_kv, requests, head_dim)
        .permute(2, 0, 1, 3)
        .reshape(requests, heads, head_dim)
    )


def _gathered(cache: torch.Tensor, group: DecodeGroup, workspace: GatherWorkspace, part: int) -> torch.Tensor:
    """The chunks' rows of `cache` (keys or values), [kv_heads * chunks, chunk, d], gathered a page at a time.

    Pooled groups write into part `part` of the workspace: keys 0, values 1 (only the padded layout
    gathers values), so both coexist.
    """
    kv_heads, slots, head_dim = cache.shape
    page_size = group.page_size
    chunks = group.pages.shape[0]
    pages = group.pages.view(-1)
    by_page = cache.view(kv_heads, slots // page_size, page_size * head_dim)
    if group.pooled:
        parts = 1 if group.grid is not None else 2
        kept = workspace.take((parts, kv_heads, pages.shape[0], page_size * head_dim), cache.dtype, cache.device)
        rows = torch.index_select(by_page, 1, pages, out=kept[part])
    else:
        # index_select, not advanced indexing: about ten times faster on CPU for this gather.
        rows = by_page.index_select(1, pages)
    return rows.view(kv_heads * chunks, -1, head_dim)
