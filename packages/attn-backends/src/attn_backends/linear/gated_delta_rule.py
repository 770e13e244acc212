"""Gated-DeltaNet's gated delta rule in pure torch: the torch_native linear-attention kernels.

Per value head a request carries a state S [Dk, Dv]. Token t (query q_t, key k_t [Dk], value
v_t [Dv], log decay g_t <= 0, write strength beta_t in (0, 1)) decays it, writes to it, reads it:

    S   <- exp(g_t) S
    S   <- S + k_t delta_t^T,   delta_t = beta_t (v_t - S^T k_t)   (write only what S mispredicts)
    o_t  = S^T q_t

q and k are L2-normalised first (x / sqrt(|x|^2 + 1e-6)) and q is scaled by Dk**-0.5: what
Qwen3-Next's layer asks of its kernel (`use_qk_l2norm_in_kernel=True`). Every product runs in
fp32 whatever the inputs' dtype: the state is a long sum of rank-one writes and rounds badly in
bf16. The output comes back in q's dtype; a state is stored in the pool's dtype (mamba_ssm_dtype).

Prefill runs the chunked form, 64 tokens a chunk. Within a chunk, with c_i the cumulative log
decay from the chunk's start and S0 the state entering it, unrolling the recurrence gives

    S_i   = exp(c_i) S0 + sum_{j<=i} exp(c_i - c_j) k_j delta_j^T
    delta = U - W S0,  U = (I + A)^-1 (beta v),  W = (I + A)^-1 (beta exp(c) k),
    A_ij  = beta_i exp(c_i - c_j) k_i.k_j  for j < i (strictly lower, so I + A is unit lower triangular)

so a chunk costs a triangular solve and a few matmuls, and only the walk from chunk to chunk is
sequential: o_i = exp(c_i) S0^T q_i + sum_{j<=i} exp(c_i - c_j) (q_i.k_j) delta_j, and the state
leaving the chunk is exp(c_last) S0 + sum_j exp(c_last - c_j) k_j delta_j^T. Sequences of a
varlen batch are padded to whole chunks and computed together: a padded token (k = v = 0,
g = beta = 0) neither decays nor writes the state, so padding changes no result.

Decode and verify run the recurrence token by token (verify keeps the state after every token).
"""

from __future__ import annotations

import torch

from attn_backends.linear.varlen_layout import (
    VarlenLayout,
    check_batch_rows,
    check_one_device,
    padded,
    unpadded,
    varlen_layout,
)

CHUNK = 64  # tokens per chunk of the chunked prefill
L2_EPS = 1e-6  # inside the root of the q/k L2 norm, as Qwen3-Next's reference computes it
POOL_DTYPES = (torch.float32, torch.bfloat16, torch.float16)  # the mamba_ssm_dtype choices


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
    """The gated delta rule over a varlen batch of prompts (or prompt chunks), chunked.

    q, k [T, H, Dk], v [T, H, Dv], g (log decay, <= 0) and beta [T, H]: H value heads (repeat the
    q/k heads to H first); cu_seqlens int64 [B+1]; state the pool [S, H, Dk, Dv]; slots int64 [B]
    (each sequence's row of the pool, distinct); has_initial bool [B]: resume from state[slot]
    (a chunked-prefill continuation) or start from zeros (a fresh prompt). Answers out [T, H, Dv]
    in q's dtype and writes each sequence's final state into state[slots[b]] (in the pool's dtype)."""
    check_gated_delta_operands(q, k, v, g, beta, state, slots, cu_seqlens=cu_seqlens, has_initial=has_initial)
    layout = varlen_layout(cu_seqlens, q.shape[0])
    if layout.lengths.numel() == 0:
        return q.new_empty((0, *v.shape[1:]))
    length = -(-max(layout.longest, 1) // CHUNK) * CHUNK
    qn, kn, vf, gf, bf = _heads_first(layout, length, *_fp32_normalised(q, k, v, g, beta))
    initial = torch.where(has_initial[:, None, None, None], state[slots].float(), 0.0)
    out, final = _chunked(qn, kn, vf, gf, bf, initial)
    state[slots] = final.to(state.dtype)
    return unpadded(out.transpose(1, 2), layout).to(q.dtype)


def gated_delta_decode(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
    slots: torch.Tensor,
) -> torch.Tensor:
    """One recurrent step per request: q, k [B, H, Dk], v [B, H, Dv], g and beta [B, H], each
    request resuming from state[slots[b]], which is updated in place. Answers out [B, H, Dv] in q's dtype."""
    check_gated_delta_operands(q, k, v, g, beta, state, slots)
    qn, kn, vf, gf, bf = _fp32_normalised(q, k, v, g, beta)
    s, out = recurrent_step(state[slots].float(), qn, kn, vf, gf, bf)
    state[slots] = s.to(state.dtype)
    return out.to(q.dtype)


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
    """A speculative verify: each request's draft tokens (packed as for prefill) run the recurrence
    from state[slots[b]], which stays untouched. Answers (out [T, H, Dv] in q's dtype, states
    [T, H, Dk, Dv] in the pool's dtype): states[t] is the state after token t, so the caller commits
    `state[slot] = states[start + accepted]` once it knows how many drafts it keeps."""
    check_gated_delta_operands(q, k, v, g, beta, state, slots, cu_seqlens=cu_seqlens)
    layout = varlen_layout(cu_seqlens, q.shape[0])
    qn, kn, vf, gf, bf = (padded(x, layout, layout.longest) for x in _fp32_normalised(q, k, v, g, beta))
    s = state[slots].float()
    outs, states = [], []
    for i in range(layout.longest):  # a padded step (k = 0, g = beta = 0) leaves s as it is
        s, o = recurrent_step(s, qn[:, i], kn[:, i], vf[:, i], gf[:, i], bf[:, i])
        outs.append(o)
        states.append(s.to(state.dtype))
    if not outs:
        return q.new_empty((0, *v.shape[1:])), state.new_empty((0, *state.shape[1:]))
    return unpadded(torch.stack(outs, 1), layout).to(q.dtype), unpadded(torch.stack(states, 1), layout)


def recurrent_step(
    s: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token of the rule on fp32 operands (q, k already normalised and q scaled): s [..., Dk, Dv],
    q, k [..., Dk], v [..., Dv], g, beta [...]; answers (the new state, the token's output [..., Dv])."""
    s = s * g.exp()[..., None, None]
    predicted = (k[..., None] * s).sum(-2)
    delta = (v - predicted) * beta[..., None]
    s = s + k[..., None] * delta[..., None, :]
    return s, (q[..., None] * s).sum(-2)


def check_gated_delta_operands(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
    slots: torch.Tensor,
    *,
    cu_seqlens: torch.Tensor | None = None,
    has_initial: torch.Tensor | None = None,
) -> None:
    """Refuse operands the gated-delta kernels (torch and triton) cannot take, naming what they take.
    Without cu_seqlens every token is its own request (decode). Reads nothing on the host."""
    if q.dim() != 3 or k.shape != q.shape or v.dim() != 3 or v.shape[:2] != q.shape[:2]:
        raise ValueError(
            f"q and k must be [T, H, Dk] and v [T, H, Dv] with the same T and H (repeat q/k heads to "
            f"the value heads first); got q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        )
    if g.shape != q.shape[:2] or beta.shape != q.shape[:2]:
        raise ValueError(
            f"g and beta must be [T, H] = {tuple(q.shape[:2])}; got g {tuple(g.shape)}, beta {tuple(beta.shape)}"
        )
    heads, dk, dv = q.shape[1], q.shape[2], v.shape[2]
    if state.dim() != 4 or tuple(state.shape[1:]) != (heads, dk, dv):
        raise ValueError(
            f"state must be the pool [slots, H, Dk, Dv] = [S, {heads}, {dk}, {dv}]; got {tuple(state.shape)}"
        )
    if state.dtype not in POOL_DTYPES:
        raise ValueError(f"the state pool holds float32, bfloat16 or float16 (mamba_ssm_dtype), not {state.dtype}")
    for name, t in (("q", q), ("k", k), ("v", v), ("g", g), ("beta", beta)):
        if not t.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got {t.dtype}")
    check_batch_rows(q.shape[0], slots, cu_seqlens, has_initial)
    check_one_device(q, k, v, g, beta, state, slots, cu_seqlens, has_initial)


def _fp32_normalised(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The operands in fp32, q and k L2-normalised and q scaled by Dk**-0.5."""
    qf, kf = q.float(), k.float()
    qf = qf * torch.rsqrt((qf * qf).sum(-1, keepdim=True) + L2_EPS) * q.shape[-1] ** -0.5
    kf = kf * torch.rsqrt((kf * kf).sum(-1, keepdim=True) + L2_EPS)
    return qf, kf, v.float(), g.float(), beta.float()


def _heads_first(layout: VarlenLayout, length: int, *xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Each packed [T, H, ...] operand padded to [B, H, length, ...]."""
    return tuple(padded(x, layout, length).transpose(1, 2) for x in xs)


def _chunked(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, s: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The chunked rule (module docstring) on a padded batch: q, k [B, H, L, Dk], v [B, H, L, Dv],
    g, beta [B, H, L] with L a multiple of CHUNK, s [B, H, Dk, Dv] the initial states; answers
    (out [B, H, L, Dv], the final states)."""
    batch, heads, length, _ = k.shape
    chunks = length // CHUNK
    q, k, v = (x.reshape(batch, heads, chunks, CHUNK, -1) for x in (q, k, v))
    g, beta = (x.reshape(batch, heads, chunks, CHUNK) for x in (g, beta))
    c = g.cumsum(-1)
    gap = c[..., :, None] - c[..., None, :]  # c_i - c_j
    ones = torch.ones(CHUNK, CHUNK, dtype=torch.bool, device=k.device)
    # Masked before exp: above the diagonal c_i - c_j > 0 and could overflow.
    strict_decay = gap.masked_fill(~ones.tril(-1), float("-inf")).exp()
    causal_decay = gap.masked_fill(~ones.tril(), float("-inf")).exp()
    system = torch.eye(CHUNK, device=k.device) + beta[..., None] * (k @ k.transpose(-1, -2)) * strict_decay
    u = torch.linalg.solve_triangular(system, beta[..., None] * v, upper=False, unitriangular=True)
    w = torch.linalg.solve_triangular(system, (beta * c.exp())[..., None] * k, upper=False, unitriangular=True)
    within = (q @ k.transpose(-1, -2)) * causal_decay
    q_from_start = q * c.exp()[..., None]
    k_to_end = k * (c[..., -1:] - c).exp()[..., None]
    chunk_decay = c[..., -1].exp()[..., None, None]
    outs = []
    for n in range(chunks):
        delta = u[:, :, n] - w[:, :, n] @ s
        outs.append(q_from_start[:, :, n] @ s + within[:, :, n] @ delta)
        s = s * chunk_decay[:, :, n] + k_to_end[:, :, n].transpose(-1, -2) @ delta
    return torch.stack(outs, 2).reshape(batch, heads, length, -1), s
