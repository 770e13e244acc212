"""InvariantLinear is batch-invariant: a row's output is bitwise the same whether it is computed
alone, among any number of other rows at any position, or on one thread or two; it is also
F.linear to within fp32 accumulation and the output's rounding, on the AVX2 path and the portable
one alike; and it refuses operands it cannot take."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from native_build import amx_tiles_available, load_library
from runtime_runner.kernels import batch_invariant_linear as bil
from runtime_runner.kernels.batch_invariant_linear import InvariantLinear

DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_INT_OF = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}


def _bits(t: torch.Tensor) -> torch.Tensor:
    """t's bit patterns, so that equality is bitwise (a NaN equals its own bits, -0 differs from +0)."""
    return t.view(_INT_OF[t.dtype])


def _assert_same_bits(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, what
    differ = int((_bits(got) != _bits(want)).sum())
    assert differ == 0, f"{what}: {differ} of {got.numel()} elements differ"


def _operands(
    seed: int, m: int, n: int, k: int, dtype: torch.dtype, with_bias: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=gen).to(dtype)
    weight = (torch.randn(n, k, generator=gen) / k**0.5).to(dtype)
    bias = torch.randn(n, generator=gen).to(dtype) if with_bias else None
    return x, weight, bias


def _with_threads(threads: int, linear: InvariantLinear, x: torch.Tensor) -> torch.Tensor:
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return linear(x)
    finally:
        torch.set_num_threads(before)


@settings(max_examples=80, deadline=None)
@given(
    dtype=st.sampled_from(DTYPES),
    m=st.integers(1, 80),
    other_m=st.integers(1, 80),
    n=st.integers(1, 300),
    k=st.integers(1, 300).map(lambda k: k | 1),
    with_bias=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
    data=st.data(),
)
def test_a_row_is_bitwise_the_same_alone_in_any_batch_and_on_any_thread_count(
    dtype: torch.dtype, m: int, other_m: int, n: int, k: int, with_bias: bool, seed: int, data: st.DataObject
) -> None:
    """Every row of an M-row call equals that row computed alone (M=1), and within another batch
    of `other_m` rows at a random position, and the whole call equals itself on 1 and 2 threads
    (shapes go up to ~7M multiply-adds, past the kernel's threshold for a second thread).

    Reverse-verified: making the kernel split k into two fp32 partial sums (k < K/2 and the rest,
    added at the end) whenever M > 1, a batch-dependent reduction, fails this test at once (every
    dtype; hypothesis shrinks to M=2, K=3)."""
    x, weight, bias = _operands(seed, m, n, k, dtype, with_bias)
    linear = InvariantLinear.of(weight, bias)
    together = linear(x)
    assert together.shape == (m, n) and together.dtype == dtype
    for i in range(m):
        _assert_same_bits(together[i : i + 1], linear(x[i : i + 1]), f"row {i} of {m} against itself alone")
    row = data.draw(st.integers(0, m - 1), label="row")
    position = data.draw(st.integers(0, other_m - 1), label="position")
    others = torch.randn(other_m, k, generator=torch.Generator().manual_seed(seed + 1)).to(dtype)
    others[position] = x[row]
    _assert_same_bits(linear(others)[position], together[row], f"row {row} at position {position} of {other_m}")
    _assert_same_bits(_with_threads(1, linear, x), _with_threads(2, linear, x), "1 thread against 2")


def test_a_prefill_sized_batch_equals_its_rows_one_at_a_time() -> None:
    """600 rows (the 6-row micro-kernel, several row blocks and tasks, 2 threads) against 600
    one-row calls (the 1-row kernels), at the default model's qkv shape in bf16."""
    x, weight, bias = _operands(3, 600, 960, 576, torch.bfloat16, True)
    linear = InvariantLinear.of(weight, bias)
    together = _with_threads(2, linear, x)
    alone = torch.cat([linear(x[i : i + 1]) for i in range(600)])
    _assert_same_bits(together, alone, "600 rows against one at a time")
    _assert_same_bits(_with_threads(1, linear, x[100:107]), together[100:107], "a 7-row slice on one thread")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("m", [1, 5, 70])
def test_matches_a_float64_linear_to_the_rounding_of_the_output(dtype: torch.dtype, with_bias: bool, m: int) -> None:
    """Against F.linear in float64 of the same (rounded) operands: the fp32 chain's error is far
    below 1e-5 of sum_k |x w| + |b|, and bf16 / fp16 add the rounding of the output (half an ulp).
    Reverse-verified: dropping the bias add in the AVX2 epilogue fails every with_bias case, and
    swapping the two halves of a bf16 panel row (columns 0-7 with 8-15) fails every bf16 case."""
    x, weight, bias = _operands(11 + m, m, 333, 577, dtype, with_bias)
    got = InvariantLinear.of(weight, bias)(x).double()
    want = F.linear(x.double(), weight.double(), None if bias is None else bias.double())
    scale = x.double().abs() @ weight.double().abs().T + (0 if bias is None else bias.double().abs())
    rounding = {torch.float32: 0.0, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}[dtype]
    excess = (got - want).abs() - (1e-5 * scale + rounding * want.abs())
    assert float(excess.max()) <= 0, f"worst excess {float(excess.max()):.3g}"


def test_k_of_one_and_a_zero_product() -> None:
    """K=1 is one fma onto +0: x * w rounded once, and a -0 product (-1 * 0) gives +0, as a chain
    that starts from +0 must; N=1 is one padded panel."""
    x = torch.tensor([[-1.0], [2.0]])
    weight = torch.tensor([[0.0], [3.0], [-0.5]])
    got = InvariantLinear.of(weight)(x)
    _assert_same_bits(got, torch.tensor([[0.0, -3.0, 0.5], [0.0, 6.0, -1.0]]), "K=1")
    assert InvariantLinear.of(weight[:1])(x).shape == (2, 1)


@pytest.mark.parametrize("dtype", DTYPES)
def test_a_nan_or_inf_stays_in_its_own_row(dtype: torch.dtype) -> None:
    """A NaN in one input row makes that row's outputs NaN (the bf16 narrowing keeps a NaN a NaN),
    an inf makes its row's outputs infinite, and the other rows stay bitwise as they are alone."""
    x, weight, bias = _operands(2, 8, 40, 33, dtype, True)
    linear = InvariantLinear.of(weight, bias)
    x[2, 5], x[6, 0] = float("nan"), float("inf")
    got = linear(x)
    assert bool(got[2].isnan().all()) and bool(got[6].isinf().all())
    for i in (0, 1, 3, 4, 5, 7):
        _assert_same_bits(got[i : i + 1], linear(x[i : i + 1]), f"row {i} beside a NaN row")


def test_the_portable_path_computes_the_same_chains_as_the_avx2_path() -> None:
    """Built without AVX2/FMA the kernel takes its plain-loop path (std::fma, one column at a time);
    every dtype's result is bitwise the AVX2 path's, since both are the same chain of correctly
    rounded fmas. Reverse-verified: accumulating the portable path as x * w + acc (two roundings)
    makes 428 of the 693 fp32 elements differ."""
    portable = bil.bind(
        load_library(
            bil.SOURCE,
            (*bil.FLAGS, "-mno-avx2", "-mno-fma"),
            package="runtime-runner",
            what="the batch-invariant linear's portable path",
        )
    )
    assert portable.batch_invariant_linear_has_avx2() == 0
    for dtype in DTYPES:
        x, weight, bias = _operands(5, 9, 77, 131, dtype, True)
        linear = InvariantLinear.of(weight, bias)
        _assert_same_bits(bil.run(x, linear.panels, linear.bias32, 77, portable), linear(x), f"portable {dtype}")


amx = pytest.mark.skipif(
    not amx_tiles_available(), reason="this CPU has no AMX tiles (amx_bf16), or Linux withholds them"
)


def test_bf16_takes_the_tile_chain_exactly_where_the_cpu_grants_tiles() -> None:
    """The AMX tests below skip only where the CPU has no tiles for this process: where it does,
    a K that is a multiple of 32 gets the tile layout, so a tile chain gone missing fails here
    rather than skipping there. Reverse-verified by hand: with BIL_AMX forced to 0 this fails on
    an AMX Xeon."""
    assert bil.amx_layout(64) == amx_tiles_available()


@amx
@pytest.mark.parametrize(("n", "k"), [(37, 64), (300, 576), (960, 576)])
def test_the_amx_tile_chain_is_batch_invariant_and_a_linear(n: int, k: int) -> None:
    """bf16 with K a multiple of 32 on an AMX CPU runs the tile chain: every row of calls of 1 to
    70 rows (one and two row tiles, tails of each) is bitwise the row alone, on 1 thread as on 2,
    and within the output's rounding (plus the fp32 accumulation's) of a float64 linear.

    Reverse-verified by hand: with the second row tile reading its x blocks in decreasing k
    order (rows 16-31 of a call computed otherwise than row 0-15 are), every case fails."""
    x, weight, bias = _operands(7 + n, 70, n, k, torch.bfloat16, True)
    linear = InvariantLinear.of(weight, bias)
    alone = torch.cat([linear(x[i : i + 1]) for i in range(70)])
    for m in (1, 5, 16, 17, 31, 32, 33, 70):
        _assert_same_bits(linear(x[:m]), alone[:m], f"{m} rows against each alone")
    _assert_same_bits(_with_threads(1, linear, x), _with_threads(2, linear, x), "1 thread against 2")
    want = F.linear(x.double(), weight.double(), bias.double())
    scale = x.double().abs() @ weight.double().abs().T + bias.double().abs()
    excess = (alone.double() - want).abs() - (1e-5 * scale + 2.0**-8 * want.abs())
    assert float(excess.max()) <= 0, f"worst excess {float(excess.max()):.3g}"


@amx
def test_amx_panels_hold_each_columns_k_pairs_side_by_side() -> None:
    """Panel p of the AMX layout is [K / 2][16][2]: element (k, column c) of the weight at
    [k // 2][c][k % 2]; K = 31 * 2 (not a multiple of 32) keeps the fp32 chain's layout."""
    weight = torch.arange(20 * 64, dtype=torch.float32).view(20, 64).bfloat16()
    panels = InvariantLinear.of(weight).panels.view(2, 32, 16, 2)
    assert torch.equal(panels[0, 5, 3], weight[3, 10:12]) and torch.equal(panels[1, 31, 3], weight[19, 62:64])
    assert float(panels[1, 0, 4:].abs().sum()) == 0  # columns 20..31 are padding
    assert not bil.amx_layout(62)


def test_packing_copies_and_holds_only_the_panels() -> None:
    weight = torch.randn(20, 8).bfloat16()
    before = weight.clone()
    linear = InvariantLinear.of(weight)
    assert torch.equal(weight, before)
    assert not any(held is weight for held in vars(linear).values())
    assert linear.panels.shape == (2, 8, 16) and linear.panels.dtype == torch.bfloat16
    assert linear.out_features == 20 and linear.in_features == 8 and linear.bias32 is None


def test_refuses_what_it_cannot_take() -> None:
    weight = torch.randn(6, 4)
    with pytest.raises(ValueError, match="runs on a CPU; the weight is on meta"):
        InvariantLinear.of(torch.empty(6, 4, device="meta"))
    with pytest.raises(ValueError, match="takes a float32, bfloat16 or float16 weight; got torch.float64"):
        InvariantLinear.of(weight.double())
    with pytest.raises(ValueError, match="takes a 2-D weight \\[out, in\\]; got shape \\(24,\\)"):
        InvariantLinear.of(weight.flatten())
    with pytest.raises(ValueError, match="a CPU bias \\[6\\] of the weight's dtype torch.float32; got shape \\(5,\\)"):
        InvariantLinear.of(weight, torch.randn(5))
    with pytest.raises(ValueError, match="a CPU bias \\[6\\].*dtype torch.bfloat16"):
        InvariantLinear.of(weight, torch.randn(6).bfloat16())
    linear = InvariantLinear.of(weight)
    with pytest.raises(ValueError, match="takes CPU rows \\[M, 4\\] of that dtype; got shape \\(3, 5\\)"):
        linear(torch.randn(3, 5))
    with pytest.raises(ValueError, match="got shape \\(3, 4\\), dtype torch.bfloat16"):
        linear(torch.randn(3, 4).bfloat16())
    with pytest.raises(ValueError, match="device meta"):
        linear(torch.empty(3, 4, device="meta"))
    with pytest.raises(ValueError, match="got shape \\(4,\\)"):
        linear(torch.randn(4))
    with pytest.raises(ValueError, match="unit stride along in_features; got strides \\(1, 3\\)"):
        linear(torch.randn(4, 3).t())
    empty = linear(torch.randn(0, 4))
    assert empty.shape == (0, 6) and empty.dtype == torch.float32
