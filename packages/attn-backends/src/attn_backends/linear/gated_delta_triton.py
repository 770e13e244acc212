"""Triton kernels of the gated delta rule (the causal conv with state is causal_conv_triton.py).

Same entry points, operands and results as the torch versions (gated_delta_rule.py and
causal_conv_state.py, whose docstrings hold the math); every load is upcast to fp32 and all
arithmetic runs in fp32, results are cast on the store. fp32 also because bf16 arithmetic and bf16
`tl.dot` give garbage in Triton's interpreter, where the CPU tests run. Every `tl.dot` asks for
exact fp32 products ("ieee"): the chunked rule solves a triangular system whose rounding the
state carries from chunk to chunk, and tf32 (10 mantissa bits) would show in it.

Gated delta, prefill (chunked, 64-token chunks, two kernels):
- `_chunk_prepare_kernel`, one program per (chunk of one sequence, head), all chunks at once: the
  cumulative log decay c of the chunk, the strictly lower A (A_ij = beta_i exp(c_i - c_j) k_i.k_j),
  (I + A)^-1 by forward substitution one row at a time (a product of powers of A would be shorter
  but cancels catastrophically when keys repeat), and from it W = (I + A)^-1 (beta exp(c) k) and
  U = (I + A)^-1 (beta v), written to fp32 workspaces with c.
- `_chunk_scan_kernel`, one program per (sequence, head, block of BLOCK_V value columns): walks the
  sequence's chunks in order carrying its [Dk, BLOCK_V] block of the state in registers: per chunk
  delta = U - W S, out = (exp(c) q) S + (causal decayed q k^T) delta, S = exp(c_last) S +
  (exp(c_last - c) k)^T delta. It reads its state block before its first chunk (or zeros) and
  writes it back after its last; slots are distinct, so no other program touches that block.
The host reads cu_seqlens once to list the chunks (the grid of the first kernel needs its size).

Gated delta, decode and verify (`_recurrent_kernel`): one program per (request, head, value block),
the recurrence token by token over the request's tokens (one for a decode), the state block in
registers; a decode writes it back to the pool, a verify writes it after every token into the
per-token `states` and leaves the pool alone. Neither reads a tensor on the host.

Block sizes and warp counts are first choices, not tuned on a GPU. The token loops are `while`
loops over loaded bounds, as in triton_kernels.py (Triton 3.6's interpreter fails on `range` over a
loaded length with numpy >= 2.4, triton-lang/triton#9171).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from attn_backends.linear.gated_delta_rule import CHUNK, L2_EPS, check_gated_delta_operands
from attn_backends.linear.triton_launch import check_pool, pow2_at_least_16
from attn_backends.linear.varlen_layout import checked_offsets

BLOCK_V = 64  # value columns of the state per program (at least 16: a tl.dot operand)


@triton.jit  # type: ignore[untyped-decorator]  # triton ships no types
def _recurrent_kernel(
    q_ptr: tl.tensor,
    k_ptr: tl.tensor,
    v_ptr: tl.tensor,
    g_ptr: tl.tensor,
    beta_ptr: tl.tensor,
    out_ptr: tl.tensor,
    state_ptr: tl.tensor,
    states_ptr: tl.tensor,
    cu_ptr: tl.tensor,
    slots_ptr: tl.tensor,
    scale: tl.float32,
    eps: tl.float32,
    H: tl.constexpr,
    DK: tl.constexpr,
    DV: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    KEEP_EACH: tl.constexpr,
    KEEP_FINAL: tl.constexpr,
) -> None:
    seq = tl.program_id(0)
    head = tl.program_id(1).to(tl.int64)
    dk = tl.arange(0, BK)
    dv = tl.program_id(2) * BV + tl.arange(0, BV)
    k_ok = dk < DK
    v_ok = dv < DV
    block_ok = k_ok[:, None] & v_ok[None, :]
    start = tl.load(cu_ptr + seq).to(tl.int64)
    end = tl.load(cu_ptr + seq + 1).to(tl.int64)
    slot = tl.load(slots_ptr + seq).to(tl.int64)
    block = dk[:, None] * DV + dv[None, :]
    pool_block = state_ptr + (slot * H + head) * DK * DV + block
    s = tl.load(pool_block, mask=block_ok, other=0.0).to(tl.float32)

    t = start
    while t < end:  # not `for ... range`: see the module docstring
        row = t * H + head
        q = tl.load(q_ptr + row * DK + dk, mask=k_ok, other=0.0).to(tl.float32)
        k = tl.load(k_ptr + row * DK + dk, mask=k_ok, other=0.0).to(tl.float32)
        v = tl.load(v_ptr + row * DV + dv, mask=v_ok, other=0.0).to(tl.float32)
        g = tl.load(g_ptr + row).to(tl.float32)
        beta = tl.load(beta_ptr + row).to(tl.float32)
        q = q * (tl.rsqrt(tl.sum(q * q, 0) + eps) * scale)
        k = k * tl.rsqrt(tl.sum(k * k, 0) + eps)
        s = s * tl.exp(g)
        delta = (v - tl.sum(s * k[:, None], 0)) * beta
        s = s + k[:, None] * delta[None, :]
        out = tl.sum(s * q[:, None], 0)
        tl.store(out_ptr + row * DV + dv, out.to(out_ptr.dtype.element_ty), mask=v_ok)
        if KEEP_EACH:
            tl.store(states_ptr + row * DK * DV + block, s.to(states_ptr.dtype.element_ty), mask=block_ok)
        t += 1
    if KEEP_FINAL:
        tl.store(pool_block, s.to(state_ptr.dtype.element_ty), mask=block_ok)


@triton.jit  # type: ignore[untyped-decorator]  # triton ships no types
def _chunk_prepare_kernel(
    k_ptr: tl.tensor,
    v_ptr: tl.tensor,
    g_ptr: tl.tensor,
    beta_ptr: tl.tensor,
    chunks_ptr: tl.tensor,
    w_ptr: tl.tensor,
    u_ptr: tl.tensor,
    c_ptr: tl.tensor,
    eps: tl.float32,
    H: tl.constexpr,
    DK: tl.constexpr,
    DV: tl.constexpr,
    BK: tl.constexpr,
    BDV: tl.constexpr,
    BT: tl.constexpr,
) -> None:
    chunk = tl.program_id(0)
    head = tl.program_id(1).to(tl.int64)
    first = tl.load(chunks_ptr + chunk * 2).to(tl.int64)
    count = tl.load(chunks_ptr + chunk * 2 + 1)
    rows = tl.arange(0, BT)
    row_ok = rows < count
    token_row = (first + rows) * H + head
    dk = tl.arange(0, BK)
    dv = tl.arange(0, BDV)
    k_tile = row_ok[:, None] & (dk < DK)[None, :]
    v_tile = row_ok[:, None] & (dv < DV)[None, :]
    k = tl.load(k_ptr + token_row[:, None] * DK + dk[None, :], mask=k_tile, other=0.0).to(tl.float32)
    k = k * tl.rsqrt(tl.sum(k * k, 1) + eps)[:, None]
    v = tl.load(v_ptr + token_row[:, None] * DV + dv[None, :], mask=v_tile, other=0.0).to(tl.float32)
    # A padded row has g = beta = 0: it neither decays nor writes.
    g = tl.load(g_ptr + token_row, mask=row_ok, other=0.0).to(tl.float32)
    beta = tl.load(beta_ptr + token_row, mask=row_ok, other=0.0).to(tl.float32)
    c = tl.cumsum(g, 0)

    below = rows[:, None] > rows[None, :]
    # exp only where j < i: there c_i - c_j <= 0, elsewhere it could overflow.
    decay = tl.exp(tl.where(below, c[:, None] - c[None, :], 0.0))
    a = tl.where(below, tl.dot(k, tl.trans(k), input_precision="ieee") * beta[:, None] * decay, 0.0)
    # (I + A)^-1 row by row: row i = e_i - sum_{j<i} A_ij row j (rows >= i are still zero, A_ij = 0 there).
    # Only the chunk's tokens: padded rows stay zero, so W and U are zero there.
    inverse = tl.zeros([BT, BT], tl.float32)
    i = 0
    while i < count:  # not `for ... range`: see the module docstring
        a_row = tl.sum(tl.where(rows[:, None] == i, a, 0.0), 0)
        new_row = tl.where(rows == i, 1.0, 0.0) - tl.sum(a_row[:, None] * inverse, 0)
        inverse = tl.where(rows[:, None] == i, new_row[None, :], inverse)
        i += 1

    w = tl.dot(inverse, k * (beta * tl.exp(c))[:, None], input_precision="ieee")
    u = tl.dot(inverse, v * beta[:, None], input_precision="ieee")
    tl.store(w_ptr + token_row[:, None] * DK + dk[None, :], w, mask=k_tile)
    tl.store(u_ptr + token_row[:, None] * DV + dv[None, :], u, mask=v_tile)
    tl.store(c_ptr + token_row, c, mask=row_ok)


@triton.jit  # type: ignore[untyped-decorator]  # triton ships no types
def _chunk_scan_kernel(
    q_ptr: tl.tensor,
    k_ptr: tl.tensor,
    w_ptr: tl.tensor,
    u_ptr: tl.tensor,
    c_ptr: tl.tensor,
    out_ptr: tl.tensor,
    state_ptr: tl.tensor,
    cu_ptr: tl.tensor,
    slots_ptr: tl.tensor,
    has_initial_ptr: tl.tensor,
    scale: tl.float32,
    eps: tl.float32,
    H: tl.constexpr,
    DK: tl.constexpr,
    DV: tl.constexpr,
    BK: tl.constexpr,
    BV: tl.constexpr,
    BT: tl.constexpr,
) -> None:
    seq = tl.program_id(0)
    head = tl.program_id(1).to(tl.int64)
    dk = tl.arange(0, BK)
    dv = tl.program_id(2) * BV + tl.arange(0, BV)
    k_ok = dk < DK
    v_ok = dv < DV
    block_ok = k_ok[:, None] & v_ok[None, :]
    start = tl.load(cu_ptr + seq).to(tl.int64)
    end = tl.load(cu_ptr + seq + 1).to(tl.int64)
    slot = tl.load(slots_ptr + seq).to(tl.int64)
    resume = tl.load(has_initial_ptr + seq) != 0
    pool_block = state_ptr + (slot * H + head) * DK * DV + dk[:, None] * DV + dv[None, :]
    # A fresh prompt starts from zeros whatever its slot holds (NaN included): selected, not scaled.
    # Not a mask of block_ok & resume: triton 3.9's interpreter makes that an int32 mask and refuses it.
    s = tl.where(resume, tl.load(pool_block, mask=block_ok, other=0.0).to(tl.float32), 0.0)

    rows = tl.arange(0, BT)
    causal = rows[:, None] >= rows[None, :]
    first = start
    while first < end:  # not `for ... range`: see the module docstring
        row_ok = first + rows < end
        token_row = (first + rows) * H + head
        k_tile = row_ok[:, None] & k_ok[None, :]
        v_tile = row_ok[:, None] & v_ok[None, :]
        q = tl.load(q_ptr + token_row[:, None] * DK + dk[None, :], mask=k_tile, other=0.0).to(tl.float32)
        q = q * (tl.rsqrt(tl.sum(q * q, 1) + eps) * scale)[:, None]
        k = tl.load(k_ptr + token_row[:, None] * DK + dk[None, :], mask=k_tile, other=0.0).to(tl.float32)
        k = k * tl.rsqrt(tl.sum(k * k, 1) + eps)[:, None]
        w = tl.load(w_ptr + token_row[:, None] * DK + dk[None, :], mask=k_tile, other=0.0)
        u = tl.load(u_ptr + token_row[:, None] * DV + dv[None, :], mask=v_tile, other=0.0)
        c = tl.load(c_ptr + token_row, mask=row_ok, other=0.0)
        c_last = tl.sum(tl.where(rows == tl.minimum(end - first, BT) - 1, c, 0.0), 0)

        delta = u - tl.dot(w, s, input_precision="ieee")  # zero on padded rows (u = w = 0 there)
        within = tl.dot(q, tl.trans(k), input_precision="ieee") * tl.exp(
            tl.where(causal, c[:, None] - c[None, :], float("-inf"))
        )
        out = tl.dot(q * tl.exp(c)[:, None], s, input_precision="ieee") + tl.dot(within, delta, input_precision="ieee")
        tl.store(out_ptr + token_row[:, None] * DV + dv[None, :], out.to(out_ptr.dtype.element_ty), mask=v_tile)
        k_to_end = k * tl.exp(c_last - c)[:, None]
        s = s * tl.exp(c_last) + tl.dot(tl.trans(k_to_end), delta, input_precision="ieee")
        first += BT
    tl.store(pool_block, s.to(state_ptr.dtype.element_ty), mask=block_ok)


def gated_delta_prefill(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    cu_seqlens: torch.Tensor,
    state: torch.Tensor,
    slots: torch.Tensor,
    has_initial: torch.Tensor,
) -> torch.Tensor:
    """The chunked gated delta rule over a varlen batch; operands and results as
    gated_delta_rule.gated_delta_prefill. Reads cu_seqlens on the host once (to list the chunks)."""
    check_gated_delta_operands(q, k, v, g, beta, state, slots, cu_seqlens=cu_seqlens, has_initial=has_initial)
    check_pool(state, "state")
    tokens, heads, dk = q.shape
    dv = v.shape[2]
    chunks = _chunk_list(checked_offsets(cu_seqlens, tokens), q.device)
    cu_seqlens, slots, has_initial = cu_seqlens.contiguous(), slots.contiguous(), has_initial.contiguous()
    out = q.new_empty((tokens, heads, dv))
    requests = slots.numel()
    if requests == 0:
        return out
    q, k, v, g, beta = (x.contiguous() for x in (q, k, v, g, beta))
    w = torch.empty((tokens, heads, dk), dtype=torch.float32, device=q.device)
    u = torch.empty((tokens, heads, dv), dtype=torch.float32, device=q.device)
    c = torch.empty((tokens, heads), dtype=torch.float32, device=q.device)
    bk, bv = pow2_at_least_16(dk), min(BLOCK_V, pow2_at_least_16(dv))
    if chunks.shape[0]:
        _chunk_prepare_kernel[(chunks.shape[0], heads)](
            k,
            v,
            g,
            beta,
            chunks,
            w,
            u,
            c,
            L2_EPS,
            H=heads,
            DK=dk,
            DV=dv,
            BK=bk,
            BDV=pow2_at_least_16(dv),
            BT=CHUNK,
        )
    _chunk_scan_kernel[(requests, heads, triton.cdiv(dv, bv))](
        q,
        k,
        w,
        u,
        c,
        out,
        state,
        cu_seqlens,
        slots,
        has_initial,
        dk**-0.5,
        L2_EPS,
        H=heads,
        DK=dk,
        DV=dv,
        BK=bk,
        BV=bv,
        BT=CHUNK,
    )
    return out


def gated_delta_decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
    slots: torch.Tensor,
) -> torch.Tensor:
    """One recurrent step per request; operands and results as gated_delta_rule.gated_delta_decode."""
    check_gated_delta_operands(q, k, v, g, beta, state, slots)
    check_pool(state, "state")
    cu_seqlens = torch.arange(slots.numel() + 1, device=q.device)
    out = q.new_empty(v.shape)
    _launch_recurrent(q, k, v, g, beta, out, state, state, cu_seqlens, slots, keep_each=False)
    return out


def gated_delta_verify(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    cu_seqlens: torch.Tensor,
    state: torch.Tensor,
    slots: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A speculative verify (the pool untouched, the state after every token answered); operands
    and results as gated_delta_rule.gated_delta_verify. Reads nothing on the host."""
    check_gated_delta_operands(q, k, v, g, beta, state, slots, cu_seqlens=cu_seqlens)
    check_pool(state, "state")
    out = q.new_empty(v.shape)
    states = state.new_empty((q.shape[0], *state.shape[1:]))
    _launch_recurrent(q, k, v, g, beta, out, state, states, cu_seqlens, slots, keep_each=True)
    return out, states


def _launch_recurrent(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    out: torch.Tensor,
    state: torch.Tensor,
    states: torch.Tensor,
    cu_seqlens: torch.Tensor,
    slots: torch.Tensor,
    *,
    keep_each: bool,
) -> None:
    """The token-by-token kernel over every request; keep_each: write the state after each token
    into `states` and leave the pool alone (verify), else write each final state into the pool."""
    requests = slots.numel()
    if requests == 0:
        return
    heads, dk = q.shape[1], q.shape[2]
    dv = v.shape[2]
    bv = min(BLOCK_V, pow2_at_least_16(dv))
    q, k, v, g, beta, cu_seqlens, slots = (x.contiguous() for x in (q, k, v, g, beta, cu_seqlens, slots))
    _recurrent_kernel[(requests, heads, triton.cdiv(dv, bv))](
        q,
        k,
        v,
        g,
        beta,
        out,
        state,
        states,
        cu_seqlens,
        slots,
        dk**-0.5,
        L2_EPS,
        H=heads,
        DK=dk,
        DV=dv,
        BK=pow2_at_least_16(dk),
        BV=bv,
        KEEP_EACH=keep_each,
        KEEP_FINAL=not keep_each,
    )


def _chunk_list(offsets: list[int], device: torch.device) -> torch.Tensor:
    """[chunks, 2] int64 (first token, token count): every sequence cut into CHUNK-token chunks."""
    rows = [
        (first, min(CHUNK, end - first))
        for start, end in zip(offsets, offsets[1:], strict=False)
        for first in range(start, end, CHUNK)
    ]
    return torch.tensor(rows, dtype=torch.int64).reshape(-1, 2).to(device)
