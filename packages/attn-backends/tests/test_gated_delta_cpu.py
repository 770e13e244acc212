"""The cpu_fused linear-attention kernels (gated_delta_cpu.py) equal torch_native's.

All six entry points against torch_native's on the same random operands: packed varlen batches of
1, 5, 64, 70, 130 and 0 tokens (an empty sequence too: a fresh one stores zeros) resuming from the
pool or from zeros, out-of-order slots, head sizes whose state width Dv is a whole number of the
kernel's 32-column blocks and one that is not (40), q and k repeated from fewer key heads to the
value heads, float32 / bfloat16 / float16 pools, bf16 activations beside fp32 g and beta, q/k/v and
x as strided views of wider projections, conv widths 2, 3 and 4 with and without bias. Outputs
agree to float32 rounding; stored states agree to float32 rounding, or to one step of the pool's
dtype where two nearly equal fp32 values round to neighbouring bf16 / fp16 values. Only the named
slots change; a verify changes none. Operands the shared checks refuse are refused with their
messages; a slot outside the pool, a pool whose state rows are strided, and tensors off the CPU are
refused before anything is written; the registry refuses cpu_fused off a CPU.

The first test to call a kernel compiles the C++ (about 15 s on a 2-core host, once per machine;
the whole file then runs in about 20 s).

Reverse-verified by hand: with the decay left out of the C++ step (`token.decay = 1.0f` in
load_token) every gated-delta parity test failed; with the C++ sequence loop resuming from the slot
whatever has_initial says, test_prefill_equals_torch_native failed (the fresh sequences read the
random pool); with the conv window not shifted in place (the `past[j] = past[j + 1]` line of
conv_decode removed), test_conv_decode_equals_torch_native failed on the pool (width 2 keeps no
older input to shift, and passed); with the slot check of first_bad_slot removed,
test_slot_outside_the_pool_is_refused_before_any_write failed (the process aborted on the heap the
out-of-pool write corrupted). All were restored.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F

from attn_backends import AttentionBackendUnavailableError
from attn_backends.linear import causal_conv_state, gated_delta_cpu, gated_delta_rule
from attn_backends.linear.kernels import linear_attn_kernels_for

LENGTHS = [1, 5, 64, 70, 130, 0]
SLOTS = [6, 0, 3, 7, 2, 4]  # out of order; 1 and 5 of the 8-slot pool are never in the batch
HAS_INITIAL = [False, True, False, True, True, False]
POOL_SIZE = 8
UNTOUCHED = [i for i in range(POOL_SIZE) if i not in SLOTS]
# (value heads, key heads, Dk, Dv): Dv 40 leaves the kernel a last block of 8 columns.
SHAPES = [(2, 2, 16, 32), (3, 3, 32, 16), (4, 2, 48, 40)]
POOL_DTYPES = [torch.float32, torch.bfloat16, torch.float16]
# Relative tolerance of a stored state: fp32 rounding, or one step of the pool's dtype.
STORED_RTOL = {torch.float32: 1e-5, torch.bfloat16: 2.0**-7, torch.float16: 2.0**-10}


@dataclass(frozen=True)
class Tokens:
    """Packed gated-delta operands of a varlen batch."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    g: torch.Tensor
    beta: torch.Tensor
    cu_seqlens: torch.Tensor

    def rule(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.q, self.k, self.v, self.g, self.beta

    def first(self, tokens: int, dtype: torch.dtype) -> Tokens:
        """The first `tokens` tokens as one-token requests, every operand in `dtype`."""
        q, k, v, g, beta = (x[:tokens].to(dtype) for x in self.rule())
        return Tokens(q, k, v, g, beta, torch.arange(tokens + 1))


def _cu(lengths: list[int]) -> torch.Tensor:
    return torch.tensor([0, *lengths]).cumsum(0)


def _slots(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64)


def _flags(values: list[bool]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.bool)


def _tokens(
    lengths: list[int], heads: int, key_heads: int, dk: int, dv: int, *, seed: int, dtype: torch.dtype = torch.float32
) -> Tokens:
    """Random operands as a layer makes them: q, k and v strided views of one wide projection row,
    q and k of `key_heads` heads repeated to the value heads; g a negative log decay, beta in (0, 1)."""
    gen = torch.Generator().manual_seed(seed)
    total = sum(lengths)
    mixed = torch.randn(total, 2 * key_heads * dk + heads * dv + 3, generator=gen).to(
        dtype
    )  # + 3: rows wider than used
    q = mixed[:, : key_heads * dk].view(total, key_heads, dk)
    k = mixed[:, key_heads * dk : 2 * key_heads * dk].view(total, key_heads, dk)
    v = mixed[:, 2 * key_heads * dk : 2 * key_heads * dk + heads * dv].view(total, heads, dv)
    if heads != key_heads:
        q, k = (x.repeat_interleave(heads // key_heads, dim=1) for x in (q, k))
    return Tokens(
        q,
        k,
        v,
        -F.softplus(torch.randn(total, heads, generator=gen)),
        torch.rand(total, heads, generator=gen),
        _cu(lengths),
    )


def _pool(heads: int, dk: int, dv: int, *, seed: int, dtype: torch.dtype) -> torch.Tensor:
    """Random states: a fresh prompt that read one would show it."""
    return torch.randn(POOL_SIZE, heads, dk, dv, generator=torch.Generator().manual_seed(seed)).to(dtype)


def _assert_out(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal to fp32 rounding, in the same dtype."""
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)


def _assert_stored(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Equal to fp32 rounding, or to one step of the pool's dtype, in that dtype."""
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.float(), expected.float(), atol=1e-5, rtol=STORED_RTOL[expected.dtype])


@pytest.mark.parametrize("pool_dtype", POOL_DTYPES)
@pytest.mark.parametrize(("heads", "key_heads", "dk", "dv"), SHAPES)
def test_prefill_equals_torch_native(heads: int, key_heads: int, dk: int, dv: int, pool_dtype: torch.dtype) -> None:
    t = _tokens(LENGTHS, heads, key_heads, dk, dv, seed=heads + dk)
    before = _pool(heads, dk, dv, seed=1, dtype=pool_dtype)
    expected_pool, pool = before.clone(), before.clone()
    expected = gated_delta_rule.gated_delta_prefill(
        *t.rule(), t.cu_seqlens, expected_pool, _slots(SLOTS), _flags(HAS_INITIAL)
    )
    out = gated_delta_cpu.gated_delta_prefill(*t.rule(), t.cu_seqlens, pool, _slots(SLOTS), _flags(HAS_INITIAL))
    assert out.dtype == expected.dtype and out.shape == expected.shape
    _assert_out(out, expected)
    _assert_stored(pool[SLOTS], expected_pool[SLOTS])
    assert torch.equal(pool[UNTOUCHED], before[UNTOUCHED])


@pytest.mark.parametrize("pool_dtype", POOL_DTYPES)
@pytest.mark.parametrize(("heads", "key_heads", "dk", "dv"), SHAPES)
def test_decode_equals_torch_native(heads: int, key_heads: int, dk: int, dv: int, pool_dtype: torch.dtype) -> None:
    slots = [5, 1, 2, 7]
    t = _tokens([1] * len(slots), heads, key_heads, dk, dv, seed=dk + dv)
    before = _pool(heads, dk, dv, seed=2, dtype=pool_dtype)
    expected_pool, pool = before.clone(), before.clone()
    for _ in range(2):  # two steps: the second reads what the first stored
        expected = gated_delta_rule.gated_delta_decode(*t.rule(), expected_pool, _slots(slots))
        out = gated_delta_cpu.gated_delta_decode(*t.rule(), pool, _slots(slots))
        _assert_out(out, expected)
        _assert_stored(pool, expected_pool)
    untouched = [i for i in range(POOL_SIZE) if i not in slots]
    assert torch.equal(pool[untouched], before[untouched])


@pytest.mark.parametrize("pool_dtype", POOL_DTYPES)
def test_verify_equals_torch_native_leaving_the_pool(pool_dtype: torch.dtype) -> None:
    lengths, slots = [1, 4, 9], [3, 7, 0]
    t = _tokens(lengths, 4, 2, 16, 40, seed=11)
    before = _pool(4, 16, 40, seed=5, dtype=pool_dtype)
    pool = before.clone()
    expected, expected_states = gated_delta_rule.gated_delta_verify(*t.rule(), t.cu_seqlens, before, _slots(slots))
    out, states = gated_delta_cpu.gated_delta_verify(*t.rule(), t.cu_seqlens, pool, _slots(slots))
    assert torch.equal(pool, before)
    _assert_out(out, expected)
    assert states.shape == expected_states.shape
    _assert_stored(states, expected_states)


def test_half_activations_and_fp64_operands() -> None:
    """bf16 q/k/v beside fp32 g and beta (the layer's mix) come back in bf16; fp64 operands in fp64."""
    t = _tokens(LENGTHS, 2, 2, 16, 32, seed=13, dtype=torch.bfloat16)
    before = _pool(2, 16, 32, seed=6, dtype=torch.bfloat16)
    expected_pool, pool = before.clone(), before.clone()
    expected = gated_delta_rule.gated_delta_prefill(
        *t.rule(), t.cu_seqlens, expected_pool, _slots(SLOTS), _flags(HAS_INITIAL)
    )
    out = gated_delta_cpu.gated_delta_prefill(*t.rule(), t.cu_seqlens, pool, _slots(SLOTS), _flags(HAS_INITIAL))
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out.float(), expected.float(), atol=1e-5, rtol=2.0**-7)
    _assert_stored(pool, expected_pool)
    wide = t.first(4, torch.float64)
    expected = gated_delta_rule.gated_delta_decode(*wide.rule(), before.clone(), _slots([5, 1, 2, 7]))
    out = gated_delta_cpu.gated_delta_decode(*wide.rule(), before.clone(), _slots([5, 1, 2, 7]))
    assert out.dtype == torch.float64
    _assert_out(out, expected)


def _conv_operands(
    tokens: int, channels: int, width: int, *, seed: int, pool_dtype: torch.dtype, bias: bool
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """x [T, C] a strided view of a wider projection, weight [C, W], bias [C] or None, a pool [8, C, W-1]."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, channels + 5, generator=gen)[:, 2 : channels + 2]
    weight = torch.randn(channels, width, generator=gen) / width
    b = torch.randn(channels, generator=gen) if bias else None
    return x, weight, b, torch.randn(POOL_SIZE, channels, width - 1, generator=gen).to(pool_dtype)


CONV_CASES = [
    (2, torch.float32, True),
    (3, torch.bfloat16, False),
    (4, torch.float32, False),
    (4, torch.float16, True),
    (4, torch.float64, True),
]


@pytest.mark.parametrize(("width", "pool_dtype", "bias"), CONV_CASES)
def test_conv_prefill_equals_torch_native(width: int, pool_dtype: torch.dtype, bias: bool) -> None:
    """300 channels: a whole 256-channel block of the kernel and a part of one."""
    x, weight, b, before = _conv_operands(sum(LENGTHS), 300, width, seed=width, pool_dtype=pool_dtype, bias=bias)
    expected_pool, pool = before.clone(), before.clone()
    expected = causal_conv_state.causal_conv_prefill(
        x, weight, b, _cu(LENGTHS), expected_pool, _slots(SLOTS), _flags(HAS_INITIAL)
    )
    y = gated_delta_cpu.causal_conv_prefill(x, weight, b, _cu(LENGTHS), pool, _slots(SLOTS), _flags(HAS_INITIAL))
    _assert_out(y, expected)
    assert torch.equal(pool, expected_pool)  # stored inputs: copies, equal once rounded alike
    assert torch.equal(pool[UNTOUCHED], before[UNTOUCHED])


@pytest.mark.parametrize(("width", "pool_dtype", "bias"), CONV_CASES)
def test_conv_decode_equals_torch_native(width: int, pool_dtype: torch.dtype, bias: bool) -> None:
    slots = [5, 1, 2, 7]
    x, weight, b, before = _conv_operands(len(slots), 300, width, seed=10 + width, pool_dtype=pool_dtype, bias=bias)
    expected_pool, pool = before.clone(), before.clone()
    for inputs in (x, x + 1):  # two steps, the second reading what the first shifted in; x a strided view
        expected = causal_conv_state.causal_conv_decode(inputs, weight, b, expected_pool, _slots(slots))
        y = gated_delta_cpu.causal_conv_decode(inputs, weight, b, pool, _slots(slots))
        _assert_out(y, expected)
        assert torch.equal(pool, expected_pool)
    untouched = [i for i in range(POOL_SIZE) if i not in slots]
    assert torch.equal(pool[untouched], before[untouched])


@pytest.mark.parametrize(("width", "pool_dtype", "bias"), CONV_CASES)
def test_conv_verify_equals_torch_native_leaving_the_pool(width: int, pool_dtype: torch.dtype, bias: bool) -> None:
    lengths, slots = [1, 4, 9], [3, 7, 0]
    x, weight, b, before = _conv_operands(sum(lengths), 300, width, seed=20 + width, pool_dtype=pool_dtype, bias=bias)
    pool = before.clone()
    expected, expected_windows = causal_conv_state.causal_conv_verify(x, weight, b, _cu(lengths), before, _slots(slots))
    y, windows = gated_delta_cpu.causal_conv_verify(x, weight, b, _cu(lengths), pool, _slots(slots))
    assert torch.equal(pool, before)
    _assert_out(y, expected)
    assert windows.dtype == pool_dtype and torch.equal(windows, expected_windows)


def test_conv_decode_on_a_strided_pool() -> None:
    """A pool whose windows are not [C, W-1] rows (a transposed view) takes the general path."""
    x, weight, b, before = _conv_operands(2, 40, 4, seed=31, pool_dtype=torch.float32, bias=True)
    expected_pool = before.clone()
    pool = before.transpose(1, 2).contiguous().transpose(1, 2)  # same values, column stride C
    expected = causal_conv_state.causal_conv_decode(x, weight, b, expected_pool, _slots([6, 2]))
    y = gated_delta_cpu.causal_conv_decode(x, weight, b, pool, _slots([6, 2]))
    _assert_out(y, expected)
    assert torch.equal(pool, expected_pool)


def test_slot_outside_the_pool_is_refused_before_any_write() -> None:
    t = _tokens([1, 1], 2, 2, 16, 32, seed=17)
    pool = _pool(2, 16, 32, seed=7, dtype=torch.float32)
    before = pool.clone()
    with pytest.raises(IndexError, match=r"slots\[1\] = 8 is outside the pool's 8 slots \(0 to 7\)"):
        gated_delta_cpu.gated_delta_decode(*t.rule(), pool, _slots([0, POOL_SIZE]))
    with pytest.raises(IndexError, match=r"slots\[0\] = -1 is outside the pool's 8 slots"):
        gated_delta_cpu.gated_delta_prefill(*t.rule(), t.cu_seqlens, pool, _slots([-1, 3]), _flags([True, True]))
    assert torch.equal(pool, before)
    x, weight, b, conv_pool = _conv_operands(2, 8, 4, seed=18, pool_dtype=torch.float32, bias=True)
    conv_before = conv_pool.clone()
    with pytest.raises(IndexError, match=r"slots\[1\] = 8 is outside the pool's 8 slots"):
        gated_delta_cpu.causal_conv_decode(x, weight, b, conv_pool, _slots([0, POOL_SIZE]))
    assert torch.equal(conv_pool, conv_before)


def test_refuses_operands_with_the_shared_messages() -> None:
    t = _tokens([2, 3], 2, 2, 16, 32, seed=19)
    pool = _pool(2, 16, 32, seed=8, dtype=torch.float32)
    with pytest.raises(ValueError, match=r"state must be the pool \[slots, H, Dk, Dv\] = \[S, 2, 16, 32\]"):
        gated_delta_cpu.gated_delta_prefill(
            *t.rule(), t.cu_seqlens, pool[:, :, :8], _slots([0, 1]), _flags([True, True])
        )
    with pytest.raises(ValueError, match="g and beta must be"):
        gated_delta_cpu.gated_delta_decode(t.q[:2], t.k[:2], t.v[:2], t.g[:2, :1], t.beta[:2], pool, _slots([0, 1]))
    with pytest.raises(ValueError, match="cu_seqlens must rise from 0 to the 5 packed tokens"):
        gated_delta_cpu.gated_delta_verify(*t.rule(), _cu([3, 3]), pool, _slots([0, 1]))
    with pytest.raises(ValueError, match="the state pool holds float32, bfloat16 or float16"):
        gated_delta_cpu.gated_delta_decode(*t.first(2, torch.float32).rule(), pool.double(), _slots([0, 1]))
    with pytest.raises(ValueError, match="has_initial must be a bool tensor"):
        gated_delta_cpu.gated_delta_prefill(
            *t.rule(), t.cu_seqlens, pool, _slots([0, 1]), torch.ones(2, dtype=torch.int64)
        )
    with pytest.raises(ValueError, match="its last \\(Dv\\) dimension must have stride 1"):
        gated_delta_cpu.gated_delta_decode(
            *t.first(2, torch.float32).rule(), pool.transpose(2, 3).contiguous().transpose(2, 3), _slots([0, 1])
        )
    x, weight, b, conv_pool = _conv_operands(5, 8, 4, seed=9, pool_dtype=torch.float32, bias=True)
    with pytest.raises(ValueError, match=r"conv_state must be the floating-point pool \[slots, C, W-1\] = \[S, 8, 3\]"):
        gated_delta_cpu.causal_conv_prefill(
            x, weight, b, _cu([2, 3]), conv_pool[:, :, :2], _slots([0, 1]), _flags([True, True])
        )
    with pytest.raises(ValueError, match="weight must be"):
        gated_delta_cpu.causal_conv_decode(x[:2], weight[:, :1], b, conv_pool[:, :, :0], _slots([0, 1]))
    with pytest.raises(ValueError, match="cu_seqlens must rise from 0 to the 5 packed tokens"):
        gated_delta_cpu.causal_conv_verify(x, weight, b, _cu([3, 3]), conv_pool, _slots([0, 1]))


def test_refused_off_a_cpu() -> None:
    """The registry answers cpu_fused's functions on a CPU only, and the kernels read CPU memory only."""
    kernels = linear_attn_kernels_for("cpu_fused", "cpu")
    assert kernels.name == "cpu_fused"
    assert kernels.gated_delta_decode is gated_delta_cpu.gated_delta_decode
    assert kernels.causal_conv_verify is gated_delta_cpu.causal_conv_verify
    with pytest.raises(
        AttentionBackendUnavailableError, match="runs on a CPU, not on cuda; there use triton or torch_native"
    ):
        linear_attn_kernels_for("cpu_fused", "cuda")
    with pytest.raises(AttentionBackendUnavailableError, match="runs on a CPU, not on mps; there use torch_native"):
        linear_attn_kernels_for("cpu_fused", "mps")
    t = _tokens([1, 1], 2, 2, 16, 32, seed=23)
    q, k, v, g, beta = (x.to("meta") for x in t.rule())
    with pytest.raises(ValueError, match="the cpu_fused gated-delta kernels run on CPU tensors, not on meta"):
        gated_delta_cpu.gated_delta_decode(
            q, k, v, g, beta, torch.empty(4, 2, 16, 32, device="meta"), torch.zeros(2, dtype=torch.int64, device="meta")
        )
    with pytest.raises(ValueError, match="the cpu_fused causal-conv kernels run on CPU tensors, not on meta"):
        gated_delta_cpu.causal_conv_decode(
            torch.empty(2, 8, device="meta"),
            torch.empty(8, 4, device="meta"),
            None,
            torch.empty(4, 8, 3, device="meta"),
            torch.zeros(2, dtype=torch.int64, device="meta"),
        )
