"""Paged scenarios and the attention they should produce, computed request by request by explicit softmax."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attn_backends import AttentionBackend


@dataclass(frozen=True)
class Metadata:
    """One forward's attention shape, as a runner would hand it."""

    page_size: int
    page_table: torch.Tensor
    prefix_lens: torch.Tensor
    extend_lens: torch.Tensor
    seq_lens: torch.Tensor
    num_tokens: int
    max_extend_len: int
    max_seq_len: int
    forward_mode: str = "extend"
    draft_step: int | None = None


def scenario(prefix: list[int], extend: list[int], page_size: int, seed: int) -> tuple[Metadata, list[list[int]]]:
    """Shuffled pages per request, so no request's slots are contiguous; answers the metadata and each
    request's slots."""
    gen = torch.Generator().manual_seed(seed)
    seqs = [p + e for p, e in zip(prefix, extend, strict=True)]
    need = [-(-s // page_size) for s in seqs]
    pages = torch.randperm(sum(need) + 3, generator=gen).tolist()
    tables, at = [], 0
    for n in need:
        tables.append(pages[at : at + n])
        at += n
    width = max(need)
    table = torch.tensor([t + [0] * (width - len(t)) for t in tables])
    mode = "decode" if max(extend) == 1 else "extend" if min(extend) > 1 else "mixed"
    meta = Metadata(
        page_size,
        table,
        torch.tensor(prefix),
        torch.tensor(extend),
        torch.tensor(seqs),
        sum(extend),
        max(extend),
        max(seqs),
        mode,
    )
    slots = [
        [t[pos // page_size] * page_size + pos % page_size for pos in range(s)]
        for t, s in zip(tables, seqs, strict=True)
    ]
    return meta, slots


def paged_tensors(
    meta: Metadata, heads: int, kv_heads: int, dim: int, dtype: torch.dtype, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random q [tokens, heads, dim] and a pool k/v [kv_heads, slots, dim] large enough for the page table."""
    gen = torch.Generator().manual_seed(seed)
    pool_slots = int(meta.page_table.max() + 4) * meta.page_size
    k_cache = torch.randn(kv_heads, pool_slots, dim, generator=gen, dtype=torch.float64).to(dtype)
    v_cache = torch.randn(kv_heads, pool_slots, dim, generator=gen, dtype=torch.float64).to(dtype)
    q = torch.randn(meta.num_tokens, heads, dim, generator=gen, dtype=torch.float64).to(dtype)
    return q, k_cache, v_cache


def reference(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, meta: Metadata, slots: list[list[int]], scale: float
) -> torch.Tensor:
    """Each token's attention over its own request's visible keys, in float64."""
    q, k_cache, v_cache = q.double(), k_cache.double(), v_cache.double()
    heads, kv_heads = q.shape[1], k_cache.shape[0]
    out, at = [], 0
    for r, own in enumerate(slots):
        prefix, extend = int(meta.prefix_lens[r]), int(meta.extend_lens[r])
        k = k_cache[:, own].transpose(0, 1).repeat_interleave(heads // kv_heads, dim=1)  # [seq, heads, d]
        v = v_cache[:, own].transpose(0, 1).repeat_interleave(heads // kv_heads, dim=1)
        for i in range(extend):
            visible = prefix + i + 1
            scores = torch.einsum("hd,shd->hs", q[at + i], k[:visible]) * scale
            out.append(torch.einsum("hs,shd->hd", scores.softmax(-1), v[:visible]))
        at += extend
    return torch.stack(out)


def was_planned(backend: AttentionBackend, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether `backend` was planned this forward: an unplanned one refuses to attend."""
    try:
        backend.attend(q, k, v, scale=1.0)
    except RuntimeError as err:
        assert "before plan" in str(err)
        return False
    return True
