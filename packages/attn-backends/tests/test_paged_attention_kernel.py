"""The CPU paged-attention kernel equals per-request causal softmax attention read from the pages,
for decodes and prompt tokens (over a cached prefix or not) in one call, in every pool dtype (and
fp32 queries over bf16 pools), at
the head sizes it has unrolled code for and at others, with its key ranges split or not; it
refuses mismatched inputs with a message. (Building it, and the errors of a machine without a
working compiler, are native_build's tests.)"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from paged_reference import paged_tensors, reference, scenario

from attn_backends.kernels.paged_attention_kernel import (
    PagedQueries,
    paged_attention,
    paged_queries,
)

# Across the kernel's 16- and 32-key blocks, one key alone, and past the 256 keys that allow a split.
LENGTHS = [1, 15, 16, 17, 33, 300, 47, 600]
# (atol, rtol) against the exact (fp64) answer: the output's own rounding in each dtype.
TOLERANCE = {
    torch.float64: (1e-10, 1e-10),
    torch.float32: (2e-6, 1e-5),
    torch.bfloat16: (2e-2, 1.6e-2),
    torch.float16: (2e-3, 2e-3),
}


@dataclass(frozen=True)
class Case:
    """Query rows as the kernel takes them, and the rows they should produce."""

    q: torch.Tensor
    k_cache: torch.Tensor
    v_cache: torch.Tensor
    queries: PagedQueries
    expected: torch.Tensor


def _mixed_batch(page_size: int, heads: int, kv_heads: int, dim: int, dtype: torch.dtype) -> Case:
    """Decodes of LENGTHS keys around a 5-token prompt over a 40-token cached prefix and a fresh
    7-token prompt; every token a query row, listed in reverse batch order."""
    prefix = [n - 1 for n in LENGTHS[:3]] + [40, 0] + [n - 1 for n in LENGTHS[3:]]
    extend = [1, 1, 1, 5, 7] + [1] * (len(LENGTHS) - 3)
    meta, slots = scenario(prefix, extend, page_size, seed=page_size + dim)
    q, k_cache, v_cache = paged_tensors(meta, heads=heads, kv_heads=kv_heads, dim=dim, dtype=dtype, seed=dim)
    owners = [r for r, e in enumerate(extend) for _ in range(e)]
    visible = [p + i + 1 for p, e in zip(prefix, extend, strict=True) for i in range(e)]
    order = list(reversed(range(meta.num_tokens)))
    queries = paged_queries(
        [owners[t] for t in order],
        order,
        [visible[t] for t in order],
        page_table=meta.page_table,
        page_size=page_size,
        num_tokens=meta.num_tokens,
    )
    return Case(q, k_cache, v_cache, queries, reference(q, k_cache, v_cache, meta, slots, 0.3)[order])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize(("heads", "kv_heads", "dim"), [(9, 3, 64), (4, 4, 128), (8, 1, 64), (6, 2, 24)])
@pytest.mark.parametrize("page_size", [1, 16])
def test_kernel_matches_per_request_softmax(
    dtype: torch.dtype, heads: int, kv_heads: int, dim: int, page_size: int
) -> None:
    """Head sizes 64 and 128 run the unrolled code (in bf16 on an AVX512-BF16 CPU, the vector path,
    whose groups of up to 4 query heads keep their output rows in registers: 9/3 and 4/4 here, 8/1
    the general group), 24 the general loops; decodes and prompt tokens.

    Reverse-verified by hand: scoring only the first 15 keys of each 16-key block in the vector path
    fails the bf16 cases at 64 and 128; dropping the running-max rescale of the accumulated values
    fails every case with more than one block; widening each value row into the scratch block at the
    wrong offset fails the 8/1 bf16 cases."""
    case = _mixed_batch(page_size, heads, kv_heads, dim, dtype)
    got = paged_attention(case.q, case.k_cache, case.v_cache, case.queries, 0.3)
    assert got.dtype == dtype and got.shape == (case.q.shape[0], heads, dim)
    atol, rtol = TOLERANCE[dtype]
    torch.testing.assert_close(got.double(), case.expected, atol=atol, rtol=rtol)


@pytest.mark.parametrize(("heads", "kv_heads", "dim"), [(9, 3, 64), (6, 2, 24)])
def test_fp32_queries_over_bf16_pools_compute_the_fp32_kernel_over_the_widened_pools(
    heads: int, kv_heads: int, dim: int
) -> None:
    """A float32 model over a bf16 KV cache: the answer is bitwise the fp32 kernel's over the
    pools widened to fp32 (widening bf16 is exact, and the rest is the fp32 path).

    Reverse-verified by hand: with the mixed entry reading its pools as fp32 (the float entry), the
    test fails."""
    case = _mixed_batch(16, heads, kv_heads, dim, torch.float32)
    k16, v16 = case.k_cache.bfloat16(), case.v_cache.bfloat16()
    got = paged_attention(case.q, k16, v16, case.queries, 0.3)
    assert got.dtype == torch.float32
    assert torch.equal(got, paged_attention(case.q, k16.float(), v16.float(), case.queries, 0.3))


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_a_lone_long_request_split_across_threads_gives_the_same_answer(threads: int) -> None:
    """One request of 2,000 keys and one KV head: the kernel splits its keys into eight ranges of
    256 positions, spread over the threads, and merges them.

    Reverse-verified by hand: merging the ranges without reweighting each by exp(its max - the
    overall max) fails every thread count."""
    meta, slots = scenario([1999], [1], 16, seed=11)
    q, k_cache, v_cache = paged_tensors(meta, heads=2, kv_heads=1, dim=64, dtype=torch.float32, seed=11)
    queries = paged_queries([0], [0], [2000], page_table=meta.page_table, page_size=16, num_tokens=1)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        got = paged_attention(q, k_cache, v_cache, queries, 0.125)
    finally:
        torch.set_num_threads(before)
    atol, rtol = TOLERANCE[torch.float32]
    torch.testing.assert_close(got.double(), reference(q, k_cache, v_cache, meta, slots, 0.125), atol=atol, rtol=rtol)


def test_mismatched_inputs_are_refused_with_what_is_accepted() -> None:
    c = _mixed_batch(1, 4, 2, 8, torch.float32)
    with pytest.raises(
        TypeError, match="q float32 with pools bfloat16.*; got q torch.float32, k torch.bfloat16, v torch.float32"
    ):
        paged_attention(c.q, c.k_cache.bfloat16(), c.v_cache, c.queries, 0.3)
    with pytest.raises(TypeError, match="got q torch.bfloat16, k torch.float32"):
        paged_attention(c.q.bfloat16(), c.k_cache, c.v_cache, c.queries, 0.3)
    with pytest.raises(ValueError, match="heads \\(4\\) a multiple of kv_heads \\(3\\)"):
        paged_attention(
            c.q, torch.cat([c.k_cache, c.k_cache[:1]]), torch.cat([c.v_cache, c.v_cache[:1]]), c.queries, 0.3
        )
    with pytest.raises(ValueError, match="requests, q_rows and seq_lens as contiguous int64 vectors of one length"):
        b = c.queries
        torch.ops.attn_backends.paged_attention(
            c.q, c.k_cache, c.v_cache, b.page_table, b.requests, b.q_rows, b.seq_lens.int(), b.page_size, 0.3
        )
    with pytest.raises(ValueError, match="int64 page table"):
        paged_queries([0], [0], [3], page_table=torch.zeros(1, 4, dtype=torch.int32), page_size=1, num_tokens=1)
    with pytest.raises(ValueError, match="query rows out of range: .*longest 600 keys in a table of 37 pages of 16"):
        paged_queries([0], [0], [600], page_table=torch.zeros(1, 37, dtype=torch.int64), page_size=16, num_tokens=1)
    with pytest.raises(ValueError, match="one key count >= 1 per row"):
        paged_queries([0, 1], [0, 1], [3], page_table=torch.zeros(2, 4, dtype=torch.int64), page_size=1, num_tokens=2)
