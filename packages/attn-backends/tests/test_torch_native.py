"""torch_native equals attention computed request by request from the pages, by explicit softmax."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch

from attn_backends import TorchNativeBackend


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


def _scenario(prefix: list[int], extend: list[int], page_size: int, seed: int) -> tuple[Metadata, list[list[int]]]:
    """Shuffled pages per request, so no request's slots are contiguous."""
    gen = torch.Generator().manual_seed(seed)
    seqs = [p + e for p, e in zip(prefix, extend, strict=True)]
    need = [-(-s // page_size) for s in seqs]
    pages = torch.randperm(sum(need) + 3, generator=gen).tolist()
    tables, at = [], 0
    for n in need:
        tables.append(pages[at: at + n])
        at += n
    width = max(need)
    table = torch.tensor([t + [0] * (width - len(t)) for t in tables])
    meta = Metadata(page_size, table, torch.tensor(prefix), torch.tensor(extend), torch.tensor(seqs), sum(extend), max(extend), max(seqs))
    slots = [[t[pos // page_size] * page_size + pos % page_size for pos in range(s)] for t, s in zip(tables, seqs, strict=True)]
    return meta, slots


def _reference(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, meta: Metadata, slots: list[list[int]], scale: float) -> torch.Tensor:
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


@pytest.mark.parametrize("page_size", [1, 4])
@pytest.mark.parametrize("prefix,extend", [
    ([0, 0, 0], [5, 1, 9]),  # extend from scratch, different lengths
    ([3, 0, 7], [4, 6, 2]),  # chunked continuations next to a fresh prompt
    ([5, 12, 1], [1, 1, 1]),  # decode
    ([6, 0, 9], [1, 8, 1]),  # mixed
    ([0, 5, 2, 9], [7, 1, 3, 1]),  # mixed: decodes between extends, one extend over a cached prefix
])
def test_matches_per_request_softmax(page_size: int, prefix: list[int], extend: list[int]) -> None:
    """Reverse-verified: running extends without causality (is_causal=False, no mask) fails every
    case with extend > 1; writing the decode rows back in grouped order instead of batch order fails
    every case mixing one-token and multi-token requests."""
    meta, slots = _scenario(prefix, extend, page_size, seed=page_size + sum(prefix))
    heads, kv_heads, dim = 4, 2, 8
    gen = torch.Generator().manual_seed(3)
    pool_slots = int(meta.page_table.max() + 4) * page_size
    k_cache = torch.randn(kv_heads, pool_slots, dim, generator=gen, dtype=torch.float64)
    v_cache = torch.randn(kv_heads, pool_slots, dim, generator=gen, dtype=torch.float64)
    q = torch.randn(meta.num_tokens, heads, dim, generator=gen, dtype=torch.float64)
    backend = TorchNativeBackend()
    backend.plan(meta)
    got = backend.attend(q, k_cache, v_cache, scale=1 / math.sqrt(dim))
    torch.testing.assert_close(got, _reference(q, k_cache, v_cache, meta, slots, 1 / math.sqrt(dim)))


def test_attend_before_plan_is_refused() -> None:
    with pytest.raises(RuntimeError, match="before plan"):
        TorchNativeBackend().attend(torch.zeros(1, 2, 4), torch.zeros(2, 4, 4), torch.zeros(2, 4, 4), scale=0.5)
