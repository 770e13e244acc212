"""QuantizedLinear multiplies by a weight kept quantized (every GGUF block kind: q8_0, q4_0, q4_1,
q5_0, q5_1, iq4_nl and the K-quants q2_k..q6_k; and int8): it is the product with the de-quantized
matrix (gguf-py's numpy de-quantization of random blocks) to within fp32 accumulation and the output's rounding (in
fact bitwise the batch-invariant fp32 linear of that matrix), a row's output is bitwise the same
alone, in any batch at any position and on one thread or two, its native entry gives the bits
its call gives, the int8 quantizer and the embedding rows are exact, and it refuses what it
cannot take with a message naming what it accepts. With int8 activations (the GGUF kinds) it
computes its integer rule: x quantized per 32 values, exact integer sums, batch-invariant as well."""

from __future__ import annotations

import ctypes
import typing

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from config_bags.server.bags.exec import QuantizedActivations as LeafActivations
from native_build import TIERS, CpuTier, detected_tier, load_library, tier_runs_here
from runtime_runner.kernels import quantized_linear as ql
from runtime_runner.kernels.batch_invariant_linear import InvariantLinear
from runtime_runner.kernels.native_projection import NativeProjection, NativeProjectionEntry
from runtime_runner.kernels.quantized_embedding import QuantizedEmbedding
from runtime_runner.kernels.quantized_linear import QuantizedActivations, QuantizedLinear
from runtime_runner.kernels.quantized_tensor import BLOCKS, GGML_TYPE_OF, QuantizedTensor, int8_per_channel_of

GGUF_KINDS = tuple(GGML_TYPE_OF)
KINDS = (*GGUF_KINDS, "int8")
# Each GGUF kind's fp16 fields (byte offsets in a row's block, from ggml-common.h): the scale d, and
# the minimum m or dmin. Random blocks keep every other byte random and these finite.
HALVES = {
    "q8_0": (0,),
    "q4_0": (0,),
    "q4_1": (0, 2),
    "q5_0": (0,),
    "q5_1": (0, 2),
    "iq4_nl": (0,),
    "q2_k": (80, 82),
    "q3_k": (108,),
    "q4_k": (0, 2),
    "q5_k": (0, 2),
    "q6_k": (208,),
}
DTYPES = (torch.float32, torch.bfloat16)
_INT_OF = {torch.float32: torch.int32, torch.bfloat16: torch.int16}
_ENTRY = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64
)


def _assert_same_bits(got: torch.Tensor, want: torch.Tensor, what: str) -> None:
    assert got.dtype == want.dtype and got.shape == want.shape, (
        f"{what}: {got.dtype} {got.shape} vs {want.dtype} {want.shape}"
    )
    differ = int((got.view(_INT_OF[got.dtype]) != want.view(_INT_OF[want.dtype])).sum())
    assert differ == 0, f"{what}: {differ} of {got.numel()} elements differ"


def width(kind: str, at_least: int) -> int:
    """The smallest in_features of whole blocks of `kind` not below `at_least`."""
    values = 32 if kind == "int8" else BLOCKS[kind][0]
    return -(-at_least // values) * values


def _quantized(kind: str, n: int, k: int, seed: int) -> QuantizedTensor:
    """A random [n, k] matrix of `kind`: int8 quantized from random rows (some scaled to zero);
    a GGUF kind's blocks of random bytes (every value and sub-block scale pattern), their fp16
    fields random normals / k (a few zero, one subnormal, signs mixed)."""
    gen = torch.Generator().manual_seed(seed)
    if kind == "int8":
        dense = torch.randn(n, k, generator=gen) * torch.rand(n, 1, generator=gen) / k**0.5
        if k >= 32 and n >= 3:
            dense[n // 3, :32] = 0
        return int8_per_channel_of(dense)
    values, block_bytes = BLOCKS[kind]
    blocks = torch.randint(0, 256, (n, k // values, block_bytes), generator=gen, dtype=torch.uint8)
    for at in HALVES[kind]:
        halves = (torch.randn(n, k // values, generator=gen) / k).half()
        halves[::7] = 0  # d = 0: q4_0's d * (q - 8) is a signed zero
        halves.view(-1)[-1] = 2.0**-20  # a subnormal
        blocks[..., at : at + 2] = halves.view(torch.uint8).view(n, k // values, 2)
    return QuantizedTensor(kind, blocks.view(n, -1), None, (n, k))  # type: ignore[arg-type]


def _operands(
    kind: str, seed: int, m: int, n: int, k: int, dtype: torch.dtype, with_bias: bool
) -> tuple[QuantizedTensor, torch.Tensor, torch.Tensor | None]:
    gen = torch.Generator().manual_seed(seed + 7)
    x = torch.randn(m, k, generator=gen).to(dtype)
    bias = torch.randn(n, generator=gen) if with_bias else None
    return _quantized(kind, n, k, seed), x, bias


def _with_threads(threads: int, linear: QuantizedLinear, x: torch.Tensor) -> torch.Tensor:
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        return linear(x)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("with_bias", [False, True])
def test_matches_the_float64_product_of_the_dequantized_matrix(kind: str, dtype: torch.dtype, with_bias: bool) -> None:
    """Against x @ dequantize().T + b in float64, for M = 1..7 and 70 at an odd N: the kernel's
    weights are the de-quantized values exactly (q8_0/q4_0: d * q is exact in fp32; q4_1 and int8
    round once, as dequantize does), so the only errors are the fp32 chain's, bounded by
    K * 2^-24 * (sum_k |x_k w_k| + |b|) (Higham's gamma_K for K fused multiply-adds and the bias
    add), and for bf16 the output's rounding, half an ulp: 2^-8 |y| bounds it with room for the
    chain's error moving y across a binade. Reverse-verified: de-quantizing q4_0 as d * q (no -8)
    fails every q4_0 case, and dropping the bias add from the kernels' epilogue fails every
    with_bias case."""
    k = width(kind, 320)
    for m in (*range(1, 8), 70):
        weight, x, bias = _operands(kind, 100 + m, m, 333, k, dtype, with_bias)
        got = QuantizedLinear.of(weight, bias, dtype)(x).double()
        dense = weight.dequantize().double()
        want = x.double() @ dense.T + (0 if bias is None else bias.double())
        scale = x.double().abs() @ dense.abs().T + (0 if bias is None else bias.double().abs())
        rounding = 2.0**-8 if dtype == torch.bfloat16 else 0.0
        excess = (got - want).abs() - ((k + 1) * 2.0**-24 * scale + rounding * want.abs())
        assert float(excess.max()) <= 0, f"M={m}: worst excess {float(excess.max()):.3g}"


def _as_int8_blocks(x: torch.Tensor) -> torch.Tensor:
    """Rows x as the integer rule reads them (activation_blocks.h), in float64: each block of 32
    values d * q, d = max |x| / 127, q = round_half_even(x * (127 / max |x|)) in fp32."""
    blocks = x.float().reshape(x.shape[0], -1, 32)
    largest = blocks.abs().amax(-1, keepdim=True)
    # A true fp32 division: torch's `scalar / tensor` multiplies by a reciprocal, a second rounding.
    inverse = torch.where(largest != 0, torch.full_like(largest, 127.0) / largest, torch.zeros_like(largest))
    return ((blocks * inverse).round().double() * (largest / 127).double()).reshape(x.shape)


@pytest.mark.parametrize("kind", GGUF_KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_int8_activations_compute_the_integer_rule(kind: str, dtype: torch.dtype) -> None:
    """The integer rule (integer_linear.h): against x' @ dequantize().T + b in float64, x' the
    rows as the rule quantizes them, for M = 1, 3, 6, 13 (the few-rows tasks) and 37 (the many).
    Each run's integer sum is exact, so the only errors are the fp32 scaling's: a product and an
    fma (two with a minimum) per run of at least 16 values, so (K / 16 + 2) * 2^-23 * (sum |x' w|
    + |b|) bounds them, and for bf16 the output's rounding. The result is not the float32 rule's
    (x lost its low bits), which the last assert checks, so this runs the integer kernels.
    Reverse-verified by hand: taking q6_k's offset as 31 instead of 32 fails both q6_k cases;
    reading a one- or two-bit plane's next quad for values j..j+3 fails every kind with such a plane
    (q5_0, q5_1, q2_k, q3_k, q5_k, q6_k); dropping the minimum's term fails every q4_1, q5_1, q2_k,
    q4_k and q5_k case."""
    k = width(kind, 512)
    for m in (1, 3, 6, 13, 37):
        weight, x, bias = _operands(kind, 11 + m, m, 70, k, dtype, True)
        assert bias is not None
        got = QuantizedLinear.of(weight, bias, dtype, "int8")(x).double()
        dense, rows = weight.dequantize().double(), _as_int8_blocks(x)
        want = rows @ dense.T + bias.double()
        scale = rows.abs() @ dense.abs().T + bias.double().abs()
        rounding = 2.0**-8 if dtype == torch.bfloat16 else 0.0
        excess = (got - want).abs() - ((k // 16 + 2) * 2.0**-23 * scale + rounding * want.abs())
        assert float(excess.max()) <= 0, f"M={m}: worst excess {float(excess.max()):.3g}"
    assert not torch.equal(got, QuantizedLinear.of(weight, bias, dtype)(x).double())


def _tier_param(tier: CpuTier) -> typing.Any:
    """`tier` as a test parameter, skipped where this CPU cannot run it, with the reason in its id."""
    if tier_runs_here(tier):
        return pytest.param(tier, id=tier)
    return pytest.param(
        tier,
        id=f"{tier}-absent-on-this-cpu",
        marks=pytest.mark.skip(reason=f"this CPU's highest tier is {detected_tier()}, below {tier}"),
    )


@pytest.mark.parametrize("tier", [_tier_param(t) for t in TIERS if t != "avx2"])
@pytest.mark.parametrize("kind", GGUF_KINDS)
def test_every_tier_computes_the_avx2_tiers_bits(tier: CpuTier, kind: str) -> None:
    """The integer rule's kernels of a higher tier (avx512: 512-bit vpdpbusd; amx: the many-rows
    products on AMX-INT8 tiles) give the AVX2 tier's bits: the same exact int32 sums per run, then
    the same fp32 epilogue. At M = 1..9, 13 and 16 (the few-rows kernels, blocks of up to 8 rows on
    avx512), 17, 31, 37, 50 and 100 (the many-rows path: whole tiles of 16 and their remainders),
    an odd N (a partial last panel), fp32 and bf16 outputs, with a bias, on two threads. The AVX2
    tier itself is held to the float64 reference by the test above. Reverse-verified by hand on an
    AMX Xeon: taking q6_k's offset as 31 in the 512-bit epilogue fails every q6_k case of both
    tiers; loading the tiles' weights one run late fails the amx case of every kind of 32-value
    runs (the kinds that take tiles); multiplying the signed kinds' x without w's sign fails q8_0
    and iq4_nl on both tiers."""
    k = width(kind, 512)
    for dtype in DTYPES:
        weight, x, bias = _operands(kind, 41, 100, 70, k, dtype, True)
        base = QuantizedLinear.of(weight, bias, dtype, "int8", "avx2")
        higher = QuantizedLinear.of(weight, bias, dtype, "int8", tier)
        assert (base.tier, higher.tier) == ("avx2", tier)
        for m in (*range(1, 10), 13, 16, 17, 31, 37, 50, 100):
            _assert_same_bits(
                _with_threads(2, higher, x[:m]), _with_threads(2, base, x[:m]), f"{tier} {kind} {dtype} M={m}"
            )


def test_a_tier_above_the_cpus_is_refused() -> None:
    """Building for a tier this CPU cannot run is a ValueError naming both tiers, never a crash
    at the first illegal instruction."""
    above = [t for t in TIERS if not tier_runs_here(t)]
    if not above:
        pytest.skip(f"this CPU runs every tier ({detected_tier()})")
    with pytest.raises(ValueError, match=f"cannot run the {above[0]} tier on this CPU"):
        ql.library(above[0])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_is_bitwise_the_invariant_fp32_linear_of_the_dequantized_matrix(kind: str, dtype: torch.dtype) -> None:
    """The rule of quantized_linear.cpp: the same fp32 chain as InvariantLinear over the
    de-quantized matrix, the bias added in fp32, then one rounding to the activation dtype; at
    the default model's gate_up and down shapes (K-quants: 768 wide, not 576), M = 1, 3, 13 and
    37 (every micro-kernel shape, and the few-rows path's blocks of 4, 4, 4 and 1).
    Reverse-verified by hand: placing q6_k's high plane at bit 3 instead of 4 in the AVX2 decoder
    failed both q6_k cases here and in the float64 test, and the portable path; shifting q3_k's
    and q5_k's one-bit plane by one run in the pack table failed every q3_k and q5_k case here,
    in the float64 test and in the embedding test."""
    for n, at_least in ((3072, 576), (576, 1536)):
        k = width(kind, at_least)
        weight, x, bias = _operands(kind, n + k, 37, n, k, dtype, True)
        linear, reference = QuantizedLinear.of(weight, bias, dtype), InvariantLinear.of(weight.dequantize(), bias)
        for m in (1, 3, 13, 37):
            _assert_same_bits(linear(x[:m]), reference(x[:m].float()).to(dtype), f"{kind} {n}x{k} M={m}")


@settings(max_examples=120, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    dtype=st.sampled_from(DTYPES),
    m=st.integers(1, 70),
    other_m=st.integers(1, 70),
    n=st.integers(1, 300),
    blocks=st.integers(1, 10),
    with_bias=st.booleans(),
    int8_activations=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
    data=st.data(),
)
def test_a_row_is_bitwise_the_same_alone_in_any_batch_and_on_any_thread_count(
    kind: str,
    dtype: torch.dtype,
    m: int,
    other_m: int,
    n: int,
    blocks: int,
    with_bias: bool,
    int8_activations: bool,
    seed: int,
    data: st.DataObject,
) -> None:
    """Every row of an M-row call equals that row computed alone (M=1), and within another batch
    of `other_m` rows at a random position, and the whole call equals itself on 1 and 2 threads
    (shapes up to ~7M multiply-adds, past the threshold for a second thread).

    Reverse-verified by hand, each restored after: ending the chain of the many-rows path (M > 16)
    with a separate multiply and add instead of an fma, a reduction that depends on M, fails at
    once (shrunk to M=9, N=1, one block, when that path began at M > 8: row 0 differs from itself
    alone); doing so only on the second OpenMP thread of the few-rows path, a reduction that
    depends on the thread split, fails too (shrunk to M=4, N=113, 8 blocks: a row alone, on one
    thread, differs from itself in a two-thread call). Under the integer rule (int8 activations,
    the GGUF kinds): rounding a block's integer sum through fp32 differently in the 4-row kernel
    (a multiply then an add instead of the fma) fails here (shrunk to q8_0, M=4: a row against
    itself alone) and both int8 cases of the prefill-sized test."""
    k = width(kind, 32 * blocks)
    weight, x, bias = _operands(kind, seed, m, n, k, dtype, with_bias)
    activations: QuantizedActivations = "int8" if int8_activations and kind != "int8" else "float32"
    linear = QuantizedLinear.of(weight, bias, dtype, activations)
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


@pytest.mark.parametrize(
    ("kind", "dtype", "activations"),
    [
        ("q4_1", torch.float32, "float32"),
        ("q8_0", torch.bfloat16, "float32"),
        ("q6_k", torch.float32, "float32"),
        ("q4_k", torch.float32, "int8"),
        ("q5_0", torch.bfloat16, "int8"),
    ],
)
def test_a_prefill_sized_batch_equals_its_rows_one_at_a_time(
    kind: str, dtype: torch.dtype, activations: QuantizedActivations
) -> None:
    """200 rows (the many-rows path: several row blocks and tasks, 2 threads) against 200 one-row
    calls (the few-rows path, one thread), at the default model's qkv shape with a bias; fp32
    output shows every difference of the chains, bf16 is what is served."""
    weight, x, bias = _operands(kind, 3, 200, 960, width(kind, 576), dtype, True)
    linear = QuantizedLinear.of(weight, bias, dtype, activations)
    together = _with_threads(2, linear, x)
    alone = torch.cat([_with_threads(1, linear, x[i : i + 1]) for i in range(200)])
    _assert_same_bits(together, alone, f"{kind}: 200 rows against one at a time")
    _assert_same_bits(_with_threads(1, linear, x[100:107]), together[100:107], f"{kind}: a 7-row slice on one thread")


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_native_entry_gives_the_bits_of_the_call(dtype: torch.dtype) -> None:
    """The entry `native` names, called through ctypes with its descriptor as the native step
    calls it (rows at a stride wider than K, out contiguous), writes what `__call__` returns."""
    weight, x, bias = _operands("q4_1", 5, 9, 100, 96, dtype, True)
    linear = QuantizedLinear.of(weight, bias, dtype)
    assert isinstance(linear, NativeProjection)
    native = linear.native
    assert isinstance(native, NativeProjectionEntry)
    assert (native.in_features, native.out_features) == (96, 100)
    wide = torch.zeros(9, 130, dtype=dtype)
    wide[:, :96] = x
    out = torch.full((9, 100), float("nan"), dtype=dtype)
    _ENTRY(native.entry)(native.matrix, wide.data_ptr(), 130, 9, out.data_ptr(), 2)
    _assert_same_bits(out, linear(x), "the native entry against __call__")
    _assert_same_bits(linear(wide[:, :96]), linear(x), "strided rows against contiguous ones")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("activations", typing.get_args(QuantizedActivations))
def test_a_nan_or_inf_stays_in_its_own_row(dtype: torch.dtype, activations: QuantizedActivations) -> None:
    """A NaN in one input row makes that row's outputs NaN, an inf its row's outputs non-finite,
    and the other rows stay bitwise as they are alone, under either rule. Reverse-verified: the
    integer rule's block maximum skipping NaNs (as fmax does) gave the NaN row finite outputs."""
    weight, x, bias = _operands("q8_0", 2, 8, 40, 64, dtype, True)
    linear = QuantizedLinear.of(weight, bias, dtype, activations)
    x[2, 5], x[6, 0] = float("nan"), float("inf")
    got = linear(x)
    assert bool(got[2].isnan().all()) and not bool(got[6].isfinite().any())
    for i in (0, 1, 3, 4, 5, 7):
        _assert_same_bits(got[i : i + 1], linear(x[i : i + 1]), f"row {i} beside a NaN row")


def test_the_portable_path_computes_the_same_values_and_chains() -> None:
    """Built without AVX2/FMA the kernel de-quantizes one value at a time and chains with
    std::fma; every kind and dtype gives the AVX2 path's bits. Reverse-verified: accumulating the
    portable path as x * w + acc (two roundings) makes 298 of the 693 q8_0 fp32 elements differ."""
    portable = ql.bind(
        load_library(
            ql.SOURCE,
            (*ql.flags_of(None), "-mno-avx2", "-mno-fma"),
            package="runtime-runner",
            what="the quantized linear's portable path",
        )
    )
    assert portable.quantized_linear_has_avx2() == 0
    for kind in KINDS:
        for dtype in DTYPES:
            k = width(kind, 128)
            weight, x, bias = _operands(kind, 9, 9, 77, k, dtype, True)
            linear = QuantizedLinear.of(weight, bias, dtype)
            out = torch.empty(9, 77, dtype=dtype)
            getattr(portable, f"quantized_linear_{linear.suffix}")(
                ctypes.addressof(linear.matrix), x.data_ptr(), k, 9, out.data_ptr(), 2
            )
            _assert_same_bits(out, linear(x), f"portable {kind} {dtype}")


@pytest.mark.parametrize("kind", KINDS)
def test_packing_keeps_the_quantized_size_and_no_copy_of_the_input(kind: str) -> None:
    """The panels hold the weight's bytes reordered, rows padded to 16: no de-quantized copy."""
    weight = _quantized(kind, 40, width(kind, 64), 1)
    linear = QuantizedLinear.of(weight, None, torch.bfloat16)
    assert linear.packed.dtype in (torch.uint8, torch.int8)
    assert linear.packed.numel() == weight.data.numel() // 40 * 48
    assert linear.packed.data_ptr() != weight.data.data_ptr()
    assert (linear.in_features, linear.out_features, linear.kind) == (weight.in_features, 40, kind)


def test_int8_quantizer_is_symmetric_per_row_and_rounds_to_nearest() -> None:
    """scale = max |w_row| / 127, q = round(w / scale) (|q| <= 127, the row's largest at +-127),
    de-quantized within half a scale of w, plus the fp32 roundings of w / scale and q * scale (an
    ulp each of a value <= 127 scales); an all-zero row is scale 0, q 0."""
    gen = torch.Generator().manual_seed(0)
    weight = torch.randn(7, 45, generator=gen) * torch.tensor([1e-3, 1, 10, 0, 3, 1e4, 0.5])[:, None]
    quantized = int8_per_channel_of(weight.bfloat16())
    wide = weight.bfloat16().float()
    assert quantized.kind == "int8" and quantized.shape == (7, 45) and quantized.scales is not None
    torch.testing.assert_close(quantized.scales, wide.abs().amax(dim=1) / 127, rtol=0, atol=0)
    assert bool((quantized.data[3] == 0).all())
    assert bool((quantized.data.abs().amax(dim=1)[[0, 1, 2, 4, 5, 6]] == 127).all())
    error = (quantized.dequantize() - wide).abs()
    assert bool((error <= quantized.scales[:, None] * (0.5 + 2 * 127 * 2.0**-23)).all())


def test_int8_quantizer_refuses_what_it_cannot_take() -> None:
    with pytest.raises(ValueError, match="float32, bfloat16 or float16 weight \\[out, in\\]; got shape \\(3,\\)"):
        int8_per_channel_of(torch.randn(3))
    with pytest.raises(ValueError, match="got shape \\(2, 3\\), dtype torch.int32"):
        int8_per_channel_of(torch.zeros(2, 3, dtype=torch.int32))
    with pytest.raises(ValueError, match="finite values"):
        int8_per_channel_of(torch.tensor([[1.0, float("nan")]]))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_embedding_rows_are_the_dequantized_rows_rounded_once(kind: str, dtype: torch.dtype) -> None:
    """Rows of ids (repeated, any order, an id in the padded last panel) equal dequantize()'s rows
    rounded to the dtype, bit for bit (signed zeros included); tied to a linear, the embedding
    reads that linear's panels, in either layout (a GGUF kind packed for int8 activations keeps its
    planes in quads). Reverse-verified: de-quantizing q4_0 rows as fma(d, q, -8 d), the same values
    but +0 where d * (q - 8) is -0, fails both q4_0 cases; reading quads as value-ordered planes
    fails every GGUF kind."""
    k = width(kind, 96)
    weight = _quantized(kind, 45, k, 4)
    ids = torch.tensor([44, 0, 15, 16, 15, 31, 32, 3])
    layouts: tuple[QuantizedActivations, ...] = ("float32",) if kind == "int8" else ("float32", "int8")
    for activations in layouts:
        lm_head = QuantizedLinear.of(weight, None, dtype, activations)
        embedding = QuantizedEmbedding.tied_to(lm_head)
        assert embedding.table.packed is lm_head.packed
        _assert_same_bits(embedding(ids), weight.dequantize()[ids].to(dtype), f"{kind} rows, {activations} layout")
    _assert_same_bits(QuantizedEmbedding.of(weight, dtype)(ids.int()), weight.dequantize()[ids].to(dtype), "own table")
    assert embedding(torch.tensor([], dtype=torch.int64)).shape == (0, k)
    assert (embedding.num_embeddings, embedding.embedding_dim) == (45, k)


def test_refuses_what_it_cannot_take() -> None:
    weight = _quantized("q8_0", 6, 64, 0)
    with pytest.raises(ValueError, match="takes float32 or bfloat16 activations; got torch.float16"):
        QuantizedLinear.of(weight, None, torch.float16)
    with pytest.raises(ValueError, match="a CPU bias \\[6\\] of float32, bfloat16 or float16; got shape \\(5,\\)"):
        QuantizedLinear.of(weight, torch.randn(5), torch.float32)
    with pytest.raises(ValueError, match="got shape \\(6,\\), dtype torch.float64"):
        QuantizedLinear.of(weight, torch.randn(6).double(), torch.float32)
    with pytest.raises(ValueError, match="takes a QuantizedTensor \\(a GGUF kind or int8\\); got Tensor"):
        QuantizedLinear.of(torch.randn(6, 64), None, torch.float32)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'q9_9' is not one of q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, q2_k, .*, int8"):
        QuantizedTensor("q9_9", weight.data, None, (6, 64))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="a q4_k matrix has rows of whole 256-value blocks; in_features = 288"):
        QuantizedTensor("q4_k", torch.zeros(6, 162, dtype=torch.uint8), None, (6, 288))
    with pytest.raises(ValueError, match="reads activations as float32 or int8; got 'int4'"):
        QuantizedLinear.of(weight, None, torch.float32, "int4")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="int8 activations run on a GGUF kind's blocks .*; this is a per-channel int8"):
        QuantizedLinear.of(int8_per_channel_of(torch.randn(6, 64)), None, torch.float32, "int8")
    linear = QuantizedLinear.of(weight, None, torch.bfloat16)
    with pytest.raises(
        ValueError, match="takes CPU rows \\[M, 64\\] of torch.bfloat16; got shape \\(3, 64\\), dtype torch.float32"
    ):
        linear(torch.randn(3, 64))
    with pytest.raises(ValueError, match="got shape \\(3, 32\\)"):
        linear(torch.randn(3, 32).bfloat16())
    with pytest.raises(ValueError, match="got shape \\(64,\\)"):
        linear(torch.randn(64).bfloat16())
    with pytest.raises(ValueError, match="device meta"):
        linear(torch.empty(3, 64, device="meta", dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="unit stride along in_features; got strides \\(1, 3\\)"):
        linear(torch.randn(64, 3).bfloat16().t())
    assert linear(torch.randn(0, 64).bfloat16()).shape == (0, 6)
    embedding = QuantizedEmbedding.tied_to(linear)
    with pytest.raises(ValueError, match="ids in \\[0, 6\\); got ids from 0 to 6"):
        embedding(torch.tensor([0, 6]))
    with pytest.raises(ValueError, match="ids in \\[0, 6\\); got ids from -1"):
        embedding(torch.tensor([-1]))
    with pytest.raises(ValueError, match="1-D integer tensor of ids; got shape \\(2,\\), dtype torch.float32"):
        embedding(torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="got shape \\(1, 2\\)"):
        embedding(torch.tensor([[0, 1]]))


def test_the_leaf_offers_the_kernels_activations() -> None:
    """exec.kernel.quantized_activations accepts exactly the ways the kernel reads its rows."""
    assert typing.get_args(LeafActivations) == typing.get_args(QuantizedActivations) == tuple(ql._ACTIVATIONS_CODE)
