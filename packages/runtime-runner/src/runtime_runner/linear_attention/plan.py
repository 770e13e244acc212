"""The runner's side of linear attention: which state each request's forward starts from, the
kernels its phase runs over the recurrent-state pool, and the states a speculative forward keeps.

A slot holds the state after its request's first `position` tokens. A forward resumes a request
at `prefix_len`: 0 starts from zeros (a new request, or one computing its sequence again), the
slot's position continues it, a snapshot the request names (`restore_from`: a state the prefix
cache kept after exactly prefix_len tokens) is copied into the slot, and any other length must be
one the runner kept a state for, or the batch is refused before anything is computed. A request
that names `snapshot_to` has the state after its forward copied into that snapshot slot.

A request computing one token runs the decode kernels and one computing several the prefill
kernels, whatever else shares its forward: the two round differently, and a decoding request
batched beside prompt chunks (a mixed forward) must get the bits it gets alone.

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
from runtime_runner.linear_attention.recurrent_state_pool import RecurrentStatePool
from runtime_runner.linear_attention.seam import LinearAttnBackendView, LinearAttnKernelsView
from runtime_runner.loading.hybrid_config import LinearAttnShape
from runtime_runner.models.layer_attention import LinearLayerAttention


@dataclass
class _SlotHistory:
    """What the runner knows of one slot: its request, the length its pool state is after, and the
    states kept for other lengths (per linear layer: conv state, delta-rule state)."""

    rid: str
    position: int
    kept: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = field(default_factory=dict)


class LinearAttnPlanner:
    """Plans each forward's linear attention over one runner's state pool."""

    def __init__(
        self,
        pool: RecurrentStatePool,
        shape: LinearAttnShape,
        backend: LinearAttnBackendView,
        snapshots: RecurrentStatePool | None = None,
    ) -> None:
        self.pool, self.shape, self.backend, self.snapshots = pool, shape, backend, snapshots
        self._slots: dict[int, _SlotHistory] = {}

    def check(self, requests: Sequence[RequestView]) -> None:
        """Refuse a batch (before anything is computed) whose slots the pool lacks or two requests
        share, or that resumes a request where its slot holds no state."""
        self.pool.check_slots([r.state_slot for r in requests])
        for r in requests:
            self._check_snapshots(r)
            if r.prefix_len == 0 or r.restore_from >= 0:
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

    def _check_snapshots(self, r: RequestView) -> None:
        named = [s for s in (r.restore_from, r.snapshot_to) if s >= 0]
        if not named:
            return
        slots = 0 if self.snapshots is None else self.snapshots.num_slots
        if any(s >= slots for s in named):
            raise BatchError(
                f"request {r.rid!r} names snapshot slots {named}; accepted: 0..{slots - 1} (this runner keeps "
                f"{slots} snapshots)"
            )
        if r.restore_from >= 0 and r.prefix_len == 0:
            raise BatchError(
                f"request {r.rid!r} restores snapshot {r.restore_from} at prefix_len 0; accepted: a snapshot only "
                "where the request resumes after a cached prefix"
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

        def prefill_rows(
            layer: int, x: torch.Tensor, weight: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, rows: _Rows
        ) -> torch.Tensor:
            kernels = backend.prefill
            c = kernels.causal_conv_prefill(
                x, weight, None, rows.cu_seqlens, pool.conv[layer], rows.slots, rows.initial
            )
            q, k, v = heads(c)
            return kernels.gated_delta_prefill(
                q, k, v, g, beta, rows.cu_seqlens, pool.ssm[layer], rows.slots, rows.initial
            )

        def decode_rows(
            layer: int, x: torch.Tensor, weight: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, slots: torch.Tensor
        ) -> torch.Tensor:
            kernels = backend.decode
            q, k, v = heads(kernels.causal_conv_decode(x, weight, None, pool.conv[layer], slots))
            return kernels.gated_delta_decode(q, k, v, g, beta, pool.ssm[layer], slots)

        split = _split_rows(requests, device)

        def extend_layer(
            layer: int, x: torch.Tensor, weight: torch.Tensor, g: torch.Tensor, beta: torch.Tensor
        ) -> torch.Tensor:
            if split is None:
                return prefill_rows(layer, x, weight, g, beta, _Rows(cu_seqlens, slots, has_initial))
            many, one = split
            out = torch.empty((x.shape[0], s.value_heads, s.value_dim), dtype=x.dtype, device=device)
            if many.tokens.numel():
                t = many.tokens
                out[t] = prefill_rows(layer, x[t], weight, g[t], beta[t], many).to(out.dtype)
            t = one.tokens
            out[t] = decode_rows(layer, x[t], weight, g[t], beta[t], one.slots).to(out.dtype)
            return out

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
            if r.snapshot_to >= 0:
                assert self.snapshots is not None  # checked before the forward
                self.pool.copy_slot(r.state_slot, self.snapshots, r.snapshot_to)

    def _resume(self, r: RequestView) -> None:
        if r.prefix_len == 0 and r.extend_len == 1:
            # Its one token runs the decode kernels, which read the slot: start them from zeros.
            for layer in range(len(self.pool.layers)):
                self.pool.conv[layer][r.state_slot].zero_()
                self.pool.ssm[layer][r.state_slot].zero_()
        if r.restore_from >= 0:
            assert self.snapshots is not None  # checked before the forward
            self.snapshots.copy_slot(r.restore_from, self.pool, r.state_slot)
            self._slots[r.state_slot] = _SlotHistory(r.rid, r.prefix_len)
            return
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


@dataclass(frozen=True)
class _Rows:
    """Some requests of a forward: their tokens' indices in the batch, and their prefill layout."""

    cu_seqlens: torch.Tensor
    slots: torch.Tensor
    initial: torch.Tensor
    tokens: torch.Tensor = field(default_factory=lambda: torch.empty(0, dtype=torch.int64))


def _split_rows(requests: Sequence[RequestView], device: torch.device) -> tuple[_Rows, _Rows] | None:
    """The requests of an extend or mixed forward that compute several tokens and those that compute
    one (which run the decode kernels); None when every request computes several."""
    if all(r.extend_len > 1 for r in requests):
        return None
    starts = [0]
    for r in requests:
        starts.append(starts[-1] + r.extend_len)
    many = [i for i, r in enumerate(requests) if r.extend_len > 1]
    one = [i for i, r in enumerate(requests) if r.extend_len == 1]

    def rows(which: list[int]) -> _Rows:
        lengths = torch.tensor([requests[i].extend_len for i in which], dtype=torch.int64)
        tokens = [t for i in which for t in range(starts[i], starts[i + 1])]
        return _Rows(
            cu_seqlens=torch.nn.functional.pad(torch.cumsum(lengths, 0), (1, 0)).to(device),
            slots=torch.tensor([requests[i].state_slot for i in which], dtype=torch.int64, device=device),
            initial=torch.tensor([requests[i].prefix_len > 0 for i in which], device=device),
            tokens=torch.tensor(tokens, dtype=torch.int64, device=device),
        )

    return rows(many), rows(one)
