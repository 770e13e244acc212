"""cpu_paged's kernel gives a query row the same output bitwise whatever else is in the call: alone
or among any other rows, at any position in the batch, at any thread count. This is what makes a
token's attention the same as a decode row, as a prompt row, and as a prompt row after a prefix
hit (each is one row over the same keys), and so a served request's output independent of its batch."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from paged_reference import paged_tensors, scenario

from attn_backends.kernels.paged_attention_kernel import bf16_on_tiles, paged_attention, paged_queries
from native_build import amx_tiles_available

# Requests as (cached prefix, new tokens): long enough to span several 256-key ranges, and prompts
# long enough to fill several AMX tiles (16 / 3 rows each for 9 heads over 3 KV heads).
REQUESTS = st.lists(st.tuples(st.integers(0, 700), st.integers(1, 12)), min_size=1, max_size=12)


@settings(max_examples=25, deadline=None)
@given(
    requests=REQUESTS,
    dtype=st.sampled_from([torch.bfloat16, torch.float32]),
    page_size=st.sampled_from([1, 16]),
    threads=st.integers(1, 3),
    seed=st.integers(0, 2**16),
    shuffled=st.booleans(),
    data=st.data(),
)
def test_each_row_equals_its_batch_of_one(
    requests: list[tuple[int, int]],
    dtype: torch.dtype,
    page_size: int,
    threads: int,
    seed: int,
    shuffled: bool,
    data: st.DataObject,
) -> None:
    """Every row of a batch of decode and prompt rows, shuffled or in prompt order (where a CPU with
    AMX scores a prompt's neighbouring rows in one tile), equals that row computed alone on one
    thread, bitwise.

    Reverse-verified by hand: sizing the key ranges by the batch as the kernel did before issue 14
    (splits = min(ceil(4 * threads / (rows * kv_heads)), longest / 256), per_split = ceil(len /
    splits)) fails this test on batches of one or two short rows beside a long one; so does the
    tile walk on an AMX CPU when each lane's keys are masked by the tile's longest row instead of
    its own."""
    prefix = [p for p, _ in requests]
    extend = [e for _, e in requests]
    meta, _ = scenario(prefix, extend, page_size, seed=seed)
    q, k_cache, v_cache = paged_tensors(meta, heads=9, kv_heads=3, dim=64, dtype=dtype, seed=seed)
    owners = [r for r, e in enumerate(extend) for _ in range(e)]
    visible = [p + i + 1 for p, e in zip(prefix, extend, strict=True) for i in range(e)]
    order = data.draw(st.permutations(range(meta.num_tokens))) if shuffled else list(range(meta.num_tokens))

    def rows(chosen: list[int]) -> torch.Tensor:
        queries = paged_queries(
            [owners[t] for t in chosen],
            chosen,
            [visible[t] for t in chosen],
            page_table=meta.page_table,
            page_size=page_size,
            num_tokens=meta.num_tokens,
        )
        return paged_attention(q, k_cache, v_cache, queries, 0.125)

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        batch = rows(order)
    finally:
        torch.set_num_threads(before)
    torch.set_num_threads(1)
    try:
        alone = torch.cat([rows([t]) for t in order])
    finally:
        torch.set_num_threads(before)
    assert torch.equal(batch, alone)


def test_bf16_rows_run_on_tiles_exactly_where_the_cpu_grants_them() -> None:
    """Where this process may run AMX tiles, the default model's shape (head_dim 64, three query
    heads per KV head) takes the tile walk, so the test above checks the tile walk's invariance
    there; elsewhere the vector walk. Reverse-verified by hand: with the tile walk compiled out
    (PA_AMX 0) this fails on an AMX Xeon."""
    assert bf16_on_tiles(64, 3) == amx_tiles_available()
    assert not bf16_on_tiles(80, 3)  # a head size the tile walk has no code for
