"""The runner's side of linear attention: which state each request's forward starts from, the
kernels its phase runs over the recurrent-state pool, and the states a speculative forward keeps.

A slot holds the state after its request's first `position` tokens. A forward resumes a request
at `prefix_len`: 0 starts from zeros (a new request, or one computing its sequence again), the
slot's position continues it, and any other length must be one the runner kept a state for, or
the batch is refused before anything is computed.

Speculative forwards keep states rather than commit them (the scheduler learns only afterwards how
many tokens were accepted): a target_verify forward computes the state after each of a request's
tokens without writing the slot, and a draft runner's proposal step writes the slot and keeps a
copy. The request's next forward names the accepted length as its prefix_len, and the state kept
for that length is copied into the slot then (a request that stops at the verify never needs one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from runtime_runner.batch import RequestView
from runtime_runner.errors import BatchError
from runtime_runner.linear_attn_seam import LinearAttnBackendView, LinearAttnKernelsView
from runtime_runner.loading.hybrid_config import LinearAttnShape
from runtime_runner.models.layer_attention import LinearLayerAttention
from runtime_runner.recurrent_state_pool import RecurrentStatePool


@dataclass
class _SlotHistory:
    """What the runner knows of one slot: its request, the length its pool state is after, and the
    states kept for other lengths (per linear layer: conv state, delta-rule state)."""

    rid: str
    position: int
    kept: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = field(default_factory=dict)


class LinearAttnPlanner:
    """Plans each forward's linear attention over one runner's state pool."""

    def __init__(self, pool: RecurrentStatePool, shape: LinearAttnShape, backend: LinearAttnBackendView) -> None:
        self.pool, self.shape, self.backend = pool, shape, backend
        self._slots: dict[int, _SlotHistory] = {}

    def check(self, requests: Sequence[RequestView]) -> None:
        """Refuse a batch (before anything is computed) whose slots the pool lacks or two requests
        share, or that resumes a request where its slot holds no state."""
        self.pool.check_slots([r.state_slot for r in requests])
        for r in requests:
            if r.prefix_len == 0:
                continue
            history = self._slots.get(r.state_slot)
            if history is None or history.rid != r.rid:
                raise BatchError(
                    f"request {r.rid!r} resumes at {r.prefix_len} tokens in recurrent-state slot {r.state_slot}, "
                    f"which holds {'no state' if history is None else f'request {history.rid!r}'}; accepted: "
                    "prefix_len 0 for a request new to its slot"
                )
            if r.prefix_len != history.position and r.prefix_len not in history.kept:
                kept = sorted(history.kept)
                raise BatchError(
                    f"request {r.rid!r} resumes at {r.prefix_len} tokens, but its recurrent state is known after "
                    f"{history.position} tokens{f' or {kept}' if kept else ''}; accepted: one of those"
                )

    def plan(self, requests: Sequence[RequestView], forward_mode: str, draft_step: int | None) -> LinearLayerAttention:
        """Bring each request's slot to its prefix_len (checked already), and answer the per-layer
        callable this forward runs: prefill kernels for an extend or mixed batch, decode kernels
        for a decode, verify kernels (keeping every token's state) for a target_verify.
        A draft runner's proposal step (`draft_step`, 0 for the first) keeps its states too."""
        for r in requests:
            self._resume(r)
        device = self.pool.ssm[0].device
        slots = torch.tensor([r.state_slot for r in requests], dtype=torch.int64, device=device)
        extend = torch.tensor([r.extend_len for r in requests], dtype=torch.int64)
        cu_seqlens = torch.nn.functional.pad(torch.cumsum(extend, 0), (1, 0)).to(device)
        has_initial = torch.tensor([r.prefix_len > 0 for r in requests], device=device)
        cu_list = cu_seqlens.tolist()
        s = self.shape
        ratio = s.value_heads // s.key_heads
        speculative_step = draft_step is not None
        if forward_mode == "target_verify" or draft_step == 0:
            for r in requests:
                self._slots[r.state_slot].kept = {}  # a new proposal replaces the last one's states
        pool, backend = self.pool, self.backend

        def heads(c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            tokens = c.shape[0]
            q, k, v = torch.split(c, [s.keys, s.keys, s.values], dim=-1)
            q = q.reshape(tokens, s.key_heads, s.key_dim)
            k = k.reshape(tokens, s.key_heads, s.key_dim)
            if ratio > 1:  # consecutive value heads share a key head
                q, k = q.repeat_interleave(ratio, dim=1), k.repeat_interleave(ratio, dim=1)
            return q, k, v.reshape(tokens, s.value_heads, s.value_dim)

        def extend_layer(
            layer: int, x: torch.Tensor, weight: torch.Tensor, g: torch.Tensor, beta: torch.Tensor
        ) -> torch.Tensor:
            kernels = backend.prefill
            c = kernels.causal_conv_prefill(x, weight, None, cu_seqlens, pool.conv[layer], slots, has_initial)
            q, k, v = heads(c)
            return kernels.gated_delta_prefill(q, k, v, g, beta, cu_seqlens, pool.ssm[layer], slots, has_initial)

        def decode_layer(
            layer: int, x: torch.Tensor, weight: torch.Tensor, g: torch.Tensor, beta: torch.Tensor
        ) -> torch.Tensor:
            kernels = backend.decode
            q, k, v = heads(kernels.causal_conv_decode(x, weight, None, pool.conv[layer], slots))
            out = kernels.gated_delta_decode(q, k, v, g, beta, pool.ssm[layer], slots)
            if speculative_step:
                self._keep_pool_state(requests, layer)
            return out

        def verify_layer(
            layer: int, x: torch.Tensor, weight: torch.Tensor, g: torch.Tensor, beta: torch.Tensor
        ) -> torch.Tensor:
            kernels: LinearAttnKernelsView = backend.verify
            c, conv_states = kernels.causal_conv_verify(x, weight, None, cu_seqlens, pool.conv[layer], slots)
            q, k, v = heads(c)
            out, states = kernels.gated_delta_verify(q, k, v, g, beta, cu_seqlens, pool.ssm[layer], slots)
            self._keep_token_states(requests, cu_list, conv_states, states)
            return out

        if forward_mode == "target_verify":
            return verify_layer
        return decode_layer if forward_mode == "decode" else extend_layer

    def advance(self, requests: Sequence[RequestView], forward_mode: str, draft_step: int | None) -> None:
        """After a forward: each slot the forward wrote holds the state after prefix_len + extend_len
        tokens (a verify writes none); a forward that is not speculative drops the states kept."""
        if forward_mode == "target_verify":
            return
        for r in requests:
            history = self._slots[r.state_slot]
            history.position = r.prefix_len + r.extend_len
            if draft_step is None:
                history.kept = {}

    def _resume(self, r: RequestView) -> None:
        if r.prefix_len == 0:
            self._slots[r.state_slot] = _SlotHistory(r.rid, 0)
            return
        history = self._slots[r.state_slot]
        if r.prefix_len != history.position:
            for layer, (conv, ssm) in enumerate(history.kept[r.prefix_len]):
                self.pool.conv[layer][r.state_slot].copy_(conv)
                self.pool.ssm[layer][r.state_slot].copy_(ssm)
            history.position = r.prefix_len

    def _keep_token_states(
        self, requests: Sequence[RequestView], cu: list[int], conv_states: torch.Tensor, states: torch.Tensor
    ) -> None:
        for b, r in enumerate(requests):
            kept = self._slots[r.state_slot].kept
            for t in range(cu[b], cu[b + 1]):
                kept.setdefault(r.prefix_len + t - cu[b] + 1, []).append((conv_states[t], states[t]))

    def _keep_pool_state(self, requests: Sequence[RequestView], layer: int) -> None:
        for r in requests:
            kept = self._slots[r.state_slot].kept
            kept.setdefault(r.prefix_len + 1, []).append(
                (self.pool.conv[layer][r.state_slot].clone(), self.pool.ssm[layer][r.state_slot].clone())
            )
