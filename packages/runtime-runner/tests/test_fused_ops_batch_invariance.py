"""The decoder's fused CPU ops (residual add + RMSNorm, SiLU-and-mul, rotary embedding) give a row
the same output bitwise alone or among any number of rows, at any position, at any thread count:
each row is one thread's pass over that row alone."""

from __future__ import annotations

from collections.abc import Callable

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime_runner.kernels import cpu_fused_ops

DTYPES = st.sampled_from([torch.bfloat16, torch.float32])


def _at_threads(threads: int, compute: Callable[[], None]) -> None:
    """Run compute() at `threads` intra-op threads, then restore torch's setting."""
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        compute()
    finally:
        torch.set_num_threads(before)


@settings(max_examples=20, deadline=None)
@given(rows=st.integers(1, 300), dtype=DTYPES, threads=st.integers(1, 3), seed=st.integers(0, 2**16))
def test_each_row_of_every_fused_op_equals_the_row_alone(
    rows: int, dtype: torch.dtype, threads: int, seed: int
) -> None:
    """Large batches (past the ops' threshold of rows per thread) against one row at a time on one
    thread. Reverse-verified by hand: summing a norm's 16 partial sums of squares in reverse order
    when the call has more than one row fails this test."""
    gen = torch.Generator().manual_seed(seed)
    cols, heads, head_dim = 576, 12, 64
    x, delta = (torch.randn(rows, cols, generator=gen).to(dtype) for _ in range(2))
    weight = torch.randn(cols, generator=gen).to(dtype)
    gate_up = torch.randn(rows, 2 * cols, generator=gen).to(dtype)
    qk = torch.randn(rows, heads, head_dim, generator=gen).to(dtype)
    cos, sin = (torch.randn(rows, head_dim, generator=gen).to(dtype) for _ in range(2))
    batch: dict[str, torch.Tensor] = {}

    def in_batch() -> None:
        batch["sum"], batch["norm"] = cpu_fused_ops.add_rms_norm(x, delta, weight, 1e-5)
        batch["silu"] = cpu_fused_ops.silu_mul(gate_up)
        batch["rope"] = cpu_fused_ops.rope_(qk.clone(), cos, sin)

    _at_threads(threads, in_batch)
    for i in range(rows):
        row = slice(i, i + 1)
        summed, normed = cpu_fused_ops.add_rms_norm(x[row], delta[row], weight, 1e-5)
        assert torch.equal(summed, batch["sum"][row]) and torch.equal(normed, batch["norm"][row]), i
        assert torch.equal(cpu_fused_ops.silu_mul(gate_up[row]), batch["silu"][row]), i
        assert torch.equal(cpu_fused_ops.rope_(qk[row].clone(), cos[row], sin[row]), batch["rope"][row]), i
