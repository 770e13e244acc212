"""The depthwise causal conv with a per-request state (torch_native, and triton against it).

torch_native equals transformers' pure-torch Qwen3-Next conv functions run sequence by sequence:
a fresh prompt equals `causal_conv1d_fn` (zeros before it), and every sequence, fresh or resuming,
equals `causal_conv1d_update` over its slot's state (zeros for a fresh one), outputs and the state
it leaves, on packed varlen batches of 1, 5, 64, 70 and 130 tokens, at conv widths 2 and 4, with and
without a bias. It agrees with itself across the ways a server splits the work: a prefill in two
chunks equals one, a prefill then decode steps equals one longer prefill, a verify answers the
prefill's outputs and per token the state after that prefix while leaving the pool as it was.
A sequence shorter than W-1 leaves a state that still holds its older inputs (or the zero padding).
A bf16 pool works, and slots outside the batch are never written.

Reverse-verified by hand: with causal_conv_prefill changed to left-pad every sequence with zeros
(has_initial ignored), test_prefill_matches_transformers and test_prefill_in_two_chunks_equals_one
failed; with the triton conv kernel reading the slot's state whatever has_initial says,
test_triton_equals_torch failed. Both were restored.

The triton kernel equals torch_native in Triton's interpreter on CPU tensors without a GPU
(conftest sets TRITON_INTERPRET=1), compiled on CUDA tensors with a GPU (skipped on a CPU).
"""

from __future__ import annotations

import importlib.util
from types import ModuleType

import pytest
import torch

from attn_backends.linear.causal_conv_state import causal_conv_decode, causal_conv_prefill, causal_conv_verify
from attn_backends.linear.triton_launch import INTERPRETED

LENGTHS = [1, 5, 64, 70, 130]
SLOTS = [6, 0, 3, 7, 2]  # out of order; 1, 4, 5 of the 8-slot pool are never in the batch
HAS_INITIAL = [False, True, False, True, True]
POOL_SIZE = 8
ON_CPU = pytest.param(
    "cpu", marks=pytest.mark.skipif(not INTERPRETED, reason="the kernels run on CPU tensors only interpreted")
)
ON_CUDA = pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"))


def _cu(lengths: list[int], device: str = "cpu") -> torch.Tensor:
    return torch.tensor([0, *lengths], device=device).cumsum(0)


def _spans(lengths: list[int]) -> list[slice]:
    cu = _cu(lengths).tolist()
    return [slice(a, b) for a, b in zip(cu, cu[1:], strict=False)]


def _operands(
    tokens: int,
    channels: int,
    width: int,
    *,
    seed: int,
    bias: bool = True,
    device: str = "cpu",
    pool_dtype: torch.dtype = torch.float32,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """x [T, C], weight [C, W], bias [C] or None, a pool [8, C, W-1] of random states."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(tokens, channels, generator=gen)
    weight = torch.randn(channels, width, generator=gen) / width
    b = torch.randn(channels, generator=gen) if bias else None
    pool = torch.randn(POOL_SIZE, channels, width - 1, generator=gen).to(pool_dtype)
    return x.to(device), weight.to(device), None if b is None else b.to(device), pool.to(device)


def _slots(values: list[int], device: str = "cpu") -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64, device=device)


def _flags(values: list[bool], device: str = "cpu") -> torch.Tensor:
    return torch.tensor(values, dtype=torch.bool, device=device)


def _reference() -> ModuleType:
    """transformers' Qwen3-Next module, whose conv functions are its pure-torch fallbacks only
    while neither the causal-conv1d package nor the hub's `kernels` is installed."""
    module = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")
    for package in ("causal_conv1d", "kernels"):
        if importlib.util.find_spec(package) is not None:
            pytest.skip(f"{package} is installed: transformers' conv functions would not be its torch reference")
    return module


@pytest.mark.parametrize(("channels", "width", "bias"), [(8, 4, True), (24, 2, False), (200, 4, False)])
def test_prefill_matches_transformers(channels: int, width: int, bias: bool) -> None:
    reference = _reference()
    x, weight, b, before = _operands(sum(LENGTHS), channels, width, seed=channels + width, bias=bias)
    pool = before.clone()
    y = causal_conv_prefill(x, weight, b, _cu(LENGTHS), pool, _slots(SLOTS), _flags(HAS_INITIAL))
    assert y.shape == x.shape and y.dtype == x.dtype
    for s, slot, resume in zip(_spans(LENGTHS), SLOTS, HAS_INITIAL, strict=True):
        seq = x[s].T[None]  # [1, C, L]: transformers' layout
        state = before[slot][None].clone() if resume else torch.zeros(1, channels, width - 1)
        expected = reference.causal_conv1d_update(seq, state, weight, b, activation="silu")  # updates `state`
        torch.testing.assert_close(y[s], expected[0].T, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(pool[slot], state[0], atol=0, rtol=0)
        if not resume:
            fresh = reference.causal_conv1d_fn(seq, weight, b, activation="silu")
            torch.testing.assert_close(y[s], fresh[0].T, atol=1e-5, rtol=1e-5)
    untouched = [i for i in range(POOL_SIZE) if i not in SLOTS]
    assert torch.equal(pool[untouched], before[untouched])


def test_decode_matches_transformers() -> None:
    reference = _reference()
    slots = [5, 1, 2, 7]
    x, weight, b, before = _operands(len(slots), 24, 4, seed=3)
    pool = before.clone()
    y = causal_conv_decode(x, weight, b, pool, _slots(slots))
    state = before[slots].clone()
    expected = reference.causal_conv1d_update(x[:, :, None], state, weight, b, activation="silu")
    torch.testing.assert_close(y, expected[:, :, 0], atol=1e-5, rtol=1e-5)
    assert torch.equal(pool[slots], state)
    assert torch.equal(pool[[0, 3, 4, 6]], before[[0, 3, 4, 6]])


def test_short_sequences_keep_older_inputs_in_the_state() -> None:
    """One token into a width-4 conv: the state keeps two older columns, from the slot or zeros."""
    x, weight, b, before = _operands(2, 8, 4, seed=4)
    pool = before.clone()
    causal_conv_prefill(x, weight, b, _cu([1, 1]), pool, _slots([3, 5]), _flags([True, False]))
    assert torch.equal(pool[3], torch.cat((before[3][:, 1:], x[0][:, None]), dim=1))
    assert torch.equal(pool[5], torch.cat((torch.zeros(8, 2), x[1][:, None]), dim=1))


def _split(lengths: list[int], firsts: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Token rows of the first firsts[b] tokens of each sequence, and of the rest."""
    spans = _spans(lengths)
    head = torch.cat([torch.arange(s.start, s.start + f) for s, f in zip(spans, firsts, strict=True)])
    tail = torch.cat([torch.arange(s.start + f, s.stop) for s, f in zip(spans, firsts, strict=True)])
    return head, tail


def test_prefill_in_two_chunks_equals_one() -> None:
    lengths, firsts, slots = [5, 70, 130, 3], [2, 64, 67, 1], [4, 1, 6, 0]
    x, weight, b, whole_pool = _operands(sum(lengths), 24, 4, seed=5)
    split_pool = whole_pool.clone()
    whole = causal_conv_prefill(x, weight, b, _cu(lengths), whole_pool, _slots(slots), _flags([False] * 4))
    head, tail = _split(lengths, firsts)
    rest = [n - f for n, f in zip(lengths, firsts, strict=True)]
    first = causal_conv_prefill(x[head], weight, b, _cu(firsts), split_pool, _slots(slots), _flags([False] * 4))
    second = causal_conv_prefill(x[tail], weight, b, _cu(rest), split_pool, _slots(slots), _flags([True] * 4))
    for s, f, r in zip(_spans(lengths), _spans(firsts), _spans(rest), strict=True):
        torch.testing.assert_close(torch.cat((first[f], second[r])), whole[s], atol=1e-6, rtol=1e-6)
    assert torch.equal(split_pool, whole_pool)


def test_prefill_then_decodes_equals_longer_prefill() -> None:
    lengths, steps, slots = [5, 70, 4], 3, [2, 0, 5]
    x, weight, b, whole_pool = _operands(sum(lengths), 24, 4, seed=6)
    stepped_pool = whole_pool.clone()
    flags = _flags([True, False, True])
    whole = causal_conv_prefill(x, weight, b, _cu(lengths), whole_pool, _slots(slots), flags)
    head, _ = _split(lengths, [n - steps for n in lengths])
    prompt = causal_conv_prefill(
        x[head], weight, b, _cu([n - steps for n in lengths]), stepped_pool, _slots(slots), flags
    )
    spans = _spans(lengths)
    for step in range(steps):
        rows = torch.tensor([s.stop - steps + step for s in spans])
        y = causal_conv_decode(x[rows], weight, b, stepped_pool, _slots(slots))
        torch.testing.assert_close(y, whole[rows], atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(prompt, whole[head], atol=1e-6, rtol=1e-6)
    assert torch.equal(stepped_pool, whole_pool)


def test_verify_answers_prefill_and_each_prefix_state_leaving_the_pool() -> None:
    lengths, slots = [1, 4, 9], [3, 7, 0]
    x, weight, b, before = _operands(sum(lengths), 24, 4, seed=7)
    pool = before.clone()
    y, windows = causal_conv_verify(x, weight, b, _cu(lengths), pool, _slots(slots))
    assert torch.equal(pool, before)
    assert windows.shape == (sum(lengths), 24, 3) and windows.dtype == pool.dtype
    expected = causal_conv_prefill(x, weight, b, _cu(lengths), before.clone(), _slots(slots), _flags([True] * 3))
    torch.testing.assert_close(y, expected, atol=1e-6, rtol=1e-6)
    for s, n, slot in zip(_spans(lengths), lengths, slots, strict=True):
        for accepted in range(n):
            prefixes = [min(accepted + 1, m) for m in lengths]
            head, _ = _split(lengths, prefixes)
            after = before.clone()
            causal_conv_prefill(x[head], weight, b, _cu(prefixes), after, _slots(slots), _flags([True] * 3))
            assert torch.equal(windows[s.start + accepted], after[slot])


def test_bf16_pool() -> None:
    x, weight, b, wide = _operands(sum(LENGTHS), 24, 4, seed=8)
    wide = wide.to(torch.bfloat16).float()
    narrow = wide.to(torch.bfloat16)
    y_wide = causal_conv_prefill(x, weight, b, _cu(LENGTHS), wide, _slots(SLOTS), _flags(HAS_INITIAL))
    y_narrow = causal_conv_prefill(x, weight, b, _cu(LENGTHS), narrow, _slots(SLOTS), _flags(HAS_INITIAL))
    assert narrow.dtype == torch.bfloat16
    torch.testing.assert_close(y_narrow, y_wide)  # the same starting values, fp32 arithmetic
    torch.testing.assert_close(narrow.float(), wide, atol=2e-2, rtol=1e-2)
    y_wide = causal_conv_decode(x[:5], weight, b, wide, _slots(SLOTS))
    y_narrow = causal_conv_decode(x[:5], weight, b, narrow, _slots(SLOTS))
    torch.testing.assert_close(y_narrow, y_wide, atol=2e-2, rtol=1e-2)
    assert causal_conv_decode(x[:5].to(torch.bfloat16), weight, b, narrow, _slots(SLOTS)).dtype == torch.bfloat16


def test_refuses_operands_naming_what_it_takes() -> None:
    x, weight, b, pool = _operands(5, 8, 4, seed=9)
    with pytest.raises(ValueError, match=r"conv_state must be the floating-point pool \[slots, C, W-1\] = \[S, 8, 3\]"):
        causal_conv_prefill(x, weight, b, _cu([2, 3]), pool[:, :, :2], _slots([0, 1]), _flags([True, True]))
    with pytest.raises(ValueError, match="weight must be"):
        causal_conv_decode(x[:2], weight[:, :1], b, pool[:, :, :0], _slots([0, 1]))
    with pytest.raises(ValueError, match="cu_seqlens must rise from 0 to the 5 packed tokens"):
        causal_conv_verify(x, weight, b, _cu([3, 3]), pool, _slots([0, 1]))
    with pytest.raises(ValueError, match="has_initial must be a bool tensor"):
        causal_conv_prefill(x, weight, b, _cu([2, 3]), pool, _slots([0, 1]), torch.ones(2, dtype=torch.int64))


@pytest.mark.parametrize("device", [ON_CPU, ON_CUDA])
@pytest.mark.parametrize("pool_dtype", [torch.float32, torch.bfloat16])
def test_triton_equals_torch(device: str, pool_dtype: torch.dtype) -> None:
    """Prefill, decode and verify; 200 channels span two channel blocks, the tokens many token blocks."""
    from attn_backends.linear import causal_conv_triton

    x, weight, b, expected_pool = _operands(sum(LENGTHS), 200, 4, seed=10, device=device, pool_dtype=pool_dtype)
    pool = expected_pool.clone()
    cu, slots, flags = _cu(LENGTHS, device), _slots(SLOTS, device), _flags(HAS_INITIAL, device)
    # States are copies of inputs: equal once stored, except that the interpreter truncates fp32 to bf16
    # on a cast where torch (and a GPU) round to nearest: then one bf16 step apart at most.
    stored = {"atol": 0.0, "rtol": 2.0**-7 if pool_dtype == torch.bfloat16 and device == "cpu" else 0.0}
    expected = causal_conv_prefill(x, weight, b, cu, expected_pool, slots, flags)
    y = causal_conv_triton.causal_conv_prefill(x, weight, b, cu, pool, slots, flags)
    torch.testing.assert_close(y, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(pool.float(), expected_pool.float(), **stored)

    pool = expected_pool.clone()
    expected = causal_conv_decode(x[:5], weight, None, expected_pool, slots)
    y = causal_conv_triton.causal_conv_decode(x[:5], weight, None, pool, slots)
    torch.testing.assert_close(y, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(pool.float(), expected_pool.float(), **stored)

    lengths = [1, 3, 4, 2, 1]
    before = pool.clone()
    expected, expected_windows = causal_conv_verify(x[:11], weight, b, _cu(lengths, device), pool, slots)
    y, windows = causal_conv_triton.causal_conv_verify(x[:11], weight, b, _cu(lengths, device), pool, slots)
    assert torch.equal(pool, before)
    torch.testing.assert_close(y, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(windows.float(), expected_windows.float(), **stored)
