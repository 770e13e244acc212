"""The gated delta rule of the linear-attention kernels (torch_native, and triton against it).

torch_native equals transformers' pure-torch Qwen3-Next functions run sequence by sequence
(`torch_chunk_gated_delta_rule` for prefill, `torch_recurrent_gated_delta_rule` for decode, both
with `use_qk_l2norm_in_kernel=True`, as its layer calls them) on packed varlen batches of
sequences of 1, 5, 64, 70 and 130 tokens (one token, part of a chunk, a whole chunk, over one and
over two chunk boundaries) at several head counts and head sizes, resuming from the pool or from
zeros. It agrees with itself across the ways a server splits the work: a prefill in two chunks
(the second resuming with has_initial=True) equals one prefill, a prefill followed by decode
steps equals one longer prefill, and a verify answers the prefill's outputs and, per token, the
state after that prefix, leaving the pool as it was. A bf16 pool works (to bf16's rounding) and
slots outside the batch are never written.

Reverse-verified by hand: with gated_delta_prefill changed to start every sequence from zeros
(has_initial ignored), test_prefill_in_two_chunks_equals_one and test_prefill_matches_transformers
failed; with it changed to always resume from the pool, test_prefill_matches_transformers failed
(the fresh prompts then read the random pool); with the triton scan kernel loading the slot's state
whatever has_initial says, test_triton_prefill_equals_torch failed. All were restored.

The triton kernels equal torch_native: in Triton's interpreter on CPU tensors without a GPU
(conftest sets TRITON_INTERPRET=1; small shapes, the interpreter is slow), compiled on CUDA
tensors with a GPU (the CUDA cases skip on a CPU).
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from types import ModuleType

import pytest
import torch
import torch.nn.functional as F

from attn_backends.linear.gated_delta_rule import gated_delta_decode, gated_delta_prefill, gated_delta_verify
from attn_backends.linear.triton_launch import INTERPRETED

LENGTHS = [1, 5, 64, 70, 130]
SLOTS = [6, 0, 3, 7, 2]  # out of order, and 1, 4, 5 of the 8-slot pool are never in the batch
HAS_INITIAL = [False, True, False, True, True]
SHAPES = [(2, 16, 32), (3, 32, 16), (4, 32, 32)]  # (value heads, Dk, Dv)
POOL_SIZE = 8
ON_CPU = pytest.param(
    "cpu", marks=pytest.mark.skipif(not INTERPRETED, reason="the kernels run on CPU tensors only interpreted")
)
ON_CUDA = pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"))


@dataclass(frozen=True)
class Tokens:
    """Packed operands of a varlen batch."""

    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    g: torch.Tensor
    beta: torch.Tensor
    cu_seqlens: torch.Tensor

    def rows(self, index: torch.Tensor, lengths: list[int]) -> Tokens:
        """The tokens at `index`, packed as sequences of `lengths`."""
        return Tokens(
            self.q[index], self.k[index], self.v[index], self.g[index], self.beta[index], _cu(lengths, self.q.device)
        )

    def span(self, b: int) -> slice:
        return slice(int(self.cu_seqlens[b]), int(self.cu_seqlens[b + 1]))


def _cu(lengths: list[int], device: str | torch.device = "cpu") -> torch.Tensor:
    return torch.tensor([0, *lengths], device=device).cumsum(0)


def _tokens(lengths: list[int], heads: int, dk: int, dv: int, *, seed: int, device: str = "cpu") -> Tokens:
    """Random operands: g a negative log decay (-softplus), beta in (0, 1)."""
    gen = torch.Generator().manual_seed(seed)
    total = sum(lengths)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen)

    t = Tokens(
        randn(total, heads, dk),
        randn(total, heads, dk),
        randn(total, heads, dv),
        -F.softplus(randn(total, heads)),
        torch.rand(total, heads, generator=gen),
        _cu(lengths),
    )
    return Tokens(*(x.to(device) for x in (t.q, t.k, t.v, t.g, t.beta, t.cu_seqlens)))


def _pool(
    heads: int, dk: int, dv: int, *, seed: int, dtype: torch.dtype = torch.float32, device: str = "cpu"
) -> torch.Tensor:
    """A pool of random states: a fresh prompt that read one would show it."""
    return torch.randn(POOL_SIZE, heads, dk, dv, generator=torch.Generator().manual_seed(seed)).to(device, dtype)


def _flags(values: list[bool], device: str | torch.device = "cpu") -> torch.Tensor:
    return torch.tensor(values, dtype=torch.bool, device=device)


def _slots(values: list[int], device: str | torch.device = "cpu") -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int64, device=device)


def _prefill(t: Tokens, pool: torch.Tensor, slots: list[int], has_initial: list[bool]) -> torch.Tensor:
    return gated_delta_prefill(t.q, t.k, t.v, t.g, t.beta, t.cu_seqlens, pool, _slots(slots), _flags(has_initial))


def _reference() -> ModuleType:
    """transformers' Qwen3-Next module, whose gated-delta functions are its pure-torch fallbacks
    only while neither flash-linear-attention nor the hub's `kernels` is installed."""
    module = pytest.importorskip("transformers.models.qwen3_next.modeling_qwen3_next")
    for package in ("fla", "kernels"):
        if importlib.util.find_spec(package) is not None:
            pytest.skip(f"{package} is installed: transformers' gated-delta functions would not be its torch reference")
    return module


@pytest.mark.parametrize(("heads", "dk", "dv"), SHAPES)
def test_prefill_matches_transformers(heads: int, dk: int, dv: int) -> None:
    reference = _reference()
    t = _tokens(LENGTHS, heads, dk, dv, seed=heads * dk + dv)
    before = _pool(heads, dk, dv, seed=1)
    pool = before.clone()
    out = _prefill(t, pool, SLOTS, HAS_INITIAL)
    assert out.dtype == torch.float32 and out.shape == t.v.shape
    for b, (slot, resume) in enumerate(zip(SLOTS, HAS_INITIAL, strict=True)):
        s = t.span(b)
        expected, final = reference.torch_chunk_gated_delta_rule(
            t.q[None, s],
            t.k[None, s],
            t.v[None, s],
            t.g[None, s],
            t.beta[None, s],
            initial_state=before[slot][None] if resume else None,
            output_final_state=True,
            use_qk_l2norm_in_kernel=True,
        )
        torch.testing.assert_close(out[s], expected[0], atol=2e-5, rtol=1e-5)
        torch.testing.assert_close(pool[slot], final[0], atol=2e-5, rtol=1e-5)
    untouched = [i for i in range(POOL_SIZE) if i not in SLOTS]
    assert torch.equal(pool[untouched], before[untouched])


@pytest.mark.parametrize(("heads", "dk", "dv"), SHAPES)
def test_decode_matches_transformers(heads: int, dk: int, dv: int) -> None:
    reference = _reference()
    slots = [5, 1, 2, 7]
    t = _tokens([1] * len(slots), heads, dk, dv, seed=dk + dv)
    before = _pool(heads, dk, dv, seed=2)
    pool = before.clone()
    out = gated_delta_decode(t.q, t.k, t.v, t.g, t.beta, pool, _slots(slots))
    expected, final = reference.torch_recurrent_gated_delta_rule(
        t.q[:, None],
        t.k[:, None],
        t.v[:, None],
        t.g[:, None],
        t.beta[:, None],
        initial_state=before[slots],
        output_final_state=True,
        use_qk_l2norm_in_kernel=True,
    )
    torch.testing.assert_close(out, expected[:, 0], atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(pool[slots], final, atol=2e-5, rtol=1e-5)
    assert torch.equal(pool[[0, 3, 4, 6]], before[[0, 3, 4, 6]])


def _split(t: Tokens, lengths: list[int], firsts: list[int]) -> tuple[Tokens, Tokens]:
    """The first firsts[b] tokens of each sequence, and the rest, each packed."""
    head = torch.cat([torch.arange(int(t.cu_seqlens[b]), int(t.cu_seqlens[b]) + n) for b, n in enumerate(firsts)])
    tail = torch.cat([torch.arange(int(t.cu_seqlens[b]) + n, int(t.cu_seqlens[b + 1])) for b, n in enumerate(firsts)])
    return t.rows(head, firsts), t.rows(tail, [n - f for n, f in zip(lengths, firsts, strict=True)])


def test_prefill_in_two_chunks_equals_one() -> None:
    lengths, firsts, slots = [5, 70, 130], [2, 64, 67], [4, 1, 6]
    t = _tokens(lengths, 2, 16, 32, seed=5)
    whole_pool = _pool(2, 16, 32, seed=3)
    split_pool = whole_pool.clone()
    whole = _prefill(t, whole_pool, slots, [False] * 3)
    first, second = _split(t, lengths, firsts)
    out_first = _prefill(first, split_pool, slots, [False] * 3)
    out_second = _prefill(second, split_pool, slots, [True] * 3)
    for b in range(3):
        torch.testing.assert_close(
            torch.cat((out_first[first.span(b)], out_second[second.span(b)])), whole[t.span(b)], atol=2e-5, rtol=1e-5
        )
    torch.testing.assert_close(split_pool, whole_pool, atol=2e-5, rtol=1e-5)


def test_prefill_then_decodes_equals_longer_prefill() -> None:
    lengths, steps, slots = [5, 70, 66], 3, [2, 0, 5]
    t = _tokens(lengths, 3, 32, 16, seed=7)
    whole_pool = _pool(3, 32, 16, seed=4)
    stepped_pool = whole_pool.clone()
    whole = _prefill(t, whole_pool, slots, [True, False, True])
    prompt, _ = _split(t, lengths, [n - steps for n in lengths])
    outs = [_prefill(prompt, stepped_pool, slots, [True, False, True])]
    for step in range(steps):
        rows = torch.tensor([int(t.cu_seqlens[b + 1]) - steps + step for b in range(3)])
        d = t.rows(rows, [1, 1, 1])
        outs.append(gated_delta_decode(d.q, d.k, d.v, d.g, d.beta, stepped_pool, _slots(slots)))
    for b in range(3):
        stepped = torch.cat((outs[0][prompt.span(b)], *(o[b : b + 1] for o in outs[1:])))
        torch.testing.assert_close(stepped, whole[t.span(b)], atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(stepped_pool, whole_pool, atol=2e-5, rtol=1e-5)


def test_verify_answers_prefill_and_each_prefix_state_leaving_the_pool() -> None:
    lengths, slots = [1, 4, 9], [3, 7, 0]
    t = _tokens(lengths, 2, 16, 32, seed=11)
    before = _pool(2, 16, 32, seed=5)
    pool = before.clone()
    out, states = gated_delta_verify(t.q, t.k, t.v, t.g, t.beta, t.cu_seqlens, pool, _slots(slots))
    assert torch.equal(pool, before)
    assert states.shape == (sum(lengths), 2, 16, 32) and states.dtype == pool.dtype
    torch.testing.assert_close(out, _prefill(t, before.clone(), slots, [True] * 3), atol=2e-5, rtol=1e-5)
    for b, (n, slot) in enumerate(zip(lengths, slots, strict=True)):
        for accepted in range(n):
            prefix, _ = _split(t, lengths, [min(accepted + 1, m) for m in lengths])
            after = before.clone()
            _prefill(prefix, after, slots, [True] * 3)
            torch.testing.assert_close(states[t.span(b).start + accepted], after[slot], atol=2e-5, rtol=1e-5)


def test_bf16_pool() -> None:
    """A bf16 pool holds bf16 states: the results equal an fp32 pool holding the same values, to bf16's rounding."""
    t = _tokens(LENGTHS, 2, 16, 32, seed=13)
    wide = _pool(2, 16, 32, seed=6).to(torch.bfloat16).float()
    narrow = wide.to(torch.bfloat16)
    out_wide = _prefill(t, wide, SLOTS, HAS_INITIAL)
    out_narrow = _prefill(t, narrow, SLOTS, HAS_INITIAL)
    assert narrow.dtype == torch.bfloat16
    torch.testing.assert_close(out_narrow, out_wide)  # the same initial values, fp32 arithmetic
    torch.testing.assert_close(narrow.float(), wide, atol=2e-2, rtol=1e-2)
    d = _tokens([1] * 5, 2, 16, 32, seed=14)
    out_wide = gated_delta_decode(d.q, d.k, d.v, d.g, d.beta, wide, _slots(SLOTS))
    out_narrow = gated_delta_decode(d.q, d.k, d.v, d.g, d.beta, narrow, _slots(SLOTS))
    torch.testing.assert_close(out_narrow, out_wide, atol=2e-2, rtol=1e-2)
    _, states = gated_delta_verify(d.q, d.k, d.v, d.g, d.beta, d.cu_seqlens, narrow, _slots(SLOTS))
    assert states.dtype == torch.bfloat16
    bf16_in = gated_delta_decode(*(x.to(torch.bfloat16) for x in (d.q, d.k, d.v, d.g, d.beta)), narrow, _slots(SLOTS))
    assert bf16_in.dtype == torch.bfloat16


def test_refuses_operands_naming_what_it_takes() -> None:
    t = _tokens([2, 3], 2, 16, 32, seed=17)
    pool = _pool(2, 16, 32, seed=7)
    with pytest.raises(ValueError, match=r"state must be the pool \[slots, H, Dk, Dv\] = \[S, 2, 16, 32\]"):
        gated_delta_prefill(
            t.q, t.k, t.v, t.g, t.beta, t.cu_seqlens, pool[:, :, :8], _slots([0, 1]), _flags([True, True])
        )
    with pytest.raises(ValueError, match="has_initial must be a bool tensor"):
        gated_delta_prefill(t.q, t.k, t.v, t.g, t.beta, t.cu_seqlens, pool, _slots([0, 1]), torch.ones(2))
    with pytest.raises(ValueError, match="cu_seqlens must rise from 0 to the 5 packed tokens"):
        gated_delta_prefill(t.q, t.k, t.v, t.g, t.beta, _cu([2, 2]), pool, _slots([0, 1]), _flags([True, True]))
    with pytest.raises(ValueError, match="float32, bfloat16 or float16"):
        gated_delta_verify(t.q, t.k, t.v, t.g, t.beta, t.cu_seqlens, pool.double(), _slots([0, 1]))
    with pytest.raises(ValueError, match="one token per request: 5 tokens but 2 slots"):
        gated_delta_decode(t.q, t.k, t.v, t.g, t.beta, pool, _slots([0, 1]))


# The triton kernels against torch_native: (lengths, heads, Dk, Dv) small enough for the interpreter;
# Dk 24 and Dv 80 are no powers of two (masked tiles) and Dv 80 spans two value blocks.
TRITON_PREFILL = [([1, 5, 70], 2, 16, 32), ([3, 66], 2, 24, 80)]
TRITON_PREFILL_CUDA = [(LENGTHS, 4, 128, 128), ([200, 1, 64], 2, 64, 96)]


def _triton_prefill_cases(device: str) -> list[tuple[list[int], int, int, int]]:
    return TRITON_PREFILL + (TRITON_PREFILL_CUDA if device == "cuda" else [])


@pytest.mark.parametrize("device", [ON_CPU, ON_CUDA])
@pytest.mark.parametrize("pool_dtype", [torch.float32, torch.bfloat16])
def test_triton_prefill_equals_torch(device: str, pool_dtype: torch.dtype) -> None:
    from attn_backends.linear import gated_delta_triton

    for lengths, heads, dk, dv in _triton_prefill_cases(device):
        t = _tokens(lengths, heads, dk, dv, seed=dk + dv, device=device)
        slots, has_initial = _slots(SLOTS[: len(lengths)], device), _flags(HAS_INITIAL[-len(lengths) :], device)
        expected_pool = _pool(heads, dk, dv, seed=8, dtype=pool_dtype, device=device)
        pool = expected_pool.clone()
        expected = gated_delta_prefill(t.q, t.k, t.v, t.g, t.beta, t.cu_seqlens, expected_pool, slots, has_initial)
        out = gated_delta_triton.gated_delta_prefill(t.q, t.k, t.v, t.g, t.beta, t.cu_seqlens, pool, slots, has_initial)
        torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)
        # A bf16 pool may hold a state one bf16 step apart: the fp32 sums differ in their last bits, and the
        # interpreter truncates fp32 to bf16 on a cast where torch (and a GPU) round to nearest.
        atol, rtol = (1e-4, 1e-4) if pool_dtype == torch.float32 else (2e-2, 1e-2)
        torch.testing.assert_close(pool.float(), expected_pool.float(), atol=atol, rtol=rtol)


@pytest.mark.parametrize("device", [ON_CPU, ON_CUDA])
def test_triton_decode_and_verify_equal_torch(device: str) -> None:
    from attn_backends.linear import gated_delta_triton

    heads, dk, dv = 2, 24, 80
    slots = _slots([5, 1, 2], device)
    d = _tokens([1, 1, 1], heads, dk, dv, seed=21, device=device)
    expected_pool = _pool(heads, dk, dv, seed=9, device=device)
    pool = expected_pool.clone()
    expected = gated_delta_decode(d.q, d.k, d.v, d.g, d.beta, expected_pool, slots)
    out = gated_delta_triton.gated_delta_decode(d.q, d.k, d.v, d.g, d.beta, pool, slots)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(pool, expected_pool, atol=1e-5, rtol=1e-5)

    t = _tokens([1, 3, 4], heads, dk, dv, seed=22, device=device)
    before = pool.clone()
    expected_out, expected_states = gated_delta_verify(t.q, t.k, t.v, t.g, t.beta, t.cu_seqlens, pool, slots)
    out, states = gated_delta_triton.gated_delta_verify(t.q, t.k, t.v, t.g, t.beta, t.cu_seqlens, pool, slots)
    assert torch.equal(pool, before)
    torch.testing.assert_close(out, expected_out, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(states, expected_states, atol=1e-5, rtol=1e-5)
