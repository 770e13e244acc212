"""Speculation by a draft model: a second runner on a small checkpoint proposes each request's
next tokens greedily, and the target verifies them.

The worker is both the scheduler's executor and its speculator. The draft runner's pool has the
target's slots, so the scheduler's page tables index both. The draft works only when it proposes,
so a request that does not speculate (paused by the adaptive rule, or in a step too large to
verify) costs the draft nothing. Before proposing for a request whose last token sits at position
L, the draft needs its KV at every position < L. The worker keeps, per request, how many leading
positions the draft holds right (`_filled`):
- a proposal first extends the draft over the positions it lacks (`draft_extend`: the prompt the
  first time, then whatever the target decoded while the request did not speculate, or the one
  position after a verify that accepted every draft);
- a proposal of k drafts writes the draft's KV at L .. L+k-1 (inputs: the last token, then the
  drafts); after a verify that accepted a of them, the positions up to L + min(a, k-1) hold the
  right inputs.
Proposal step i is a decode on the draft runner planned as draft step i (the draft backend
factory's multi-step container gives each step its own backend). A request that leaves the
scheduler, or is retracted (its pages may go to others), is forgotten, so its draft KV is rebuilt
from the start next time. Every page-size read is the published schedule's, at the moment of use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

from config_bags.server import get_schedule
from spec_workers.acceptance_gate import AcceptanceGate
from spec_workers.batch_view import BatchView, DraftOffer, OutputView
from spec_workers.draft_batch import GREEDY, DraftBatch, DraftBatchRequest, slot_of

Output = TypeVar("Output", bound=OutputView)
Output_co = TypeVar("Output_co", bound=OutputView, covariant=True)


class TargetRunner(Protocol[Output_co]):
    """The target runner as the worker drives it (runtime_runner.ModelRunner fits)."""

    def forward(self, batch: BatchView) -> Output_co: ...


class DraftRunner(Protocol):
    """The draft runner as the worker drives it (runtime_runner.ModelRunner built with a target fits)."""

    def forward(self, batch: DraftBatch, *, draft_step: int | None = None) -> OutputView: ...

    def fill_kv(self, batch: BatchView) -> None: ...


class DraftModelWorker(Generic[Output]):
    """Executor and speculator for speculative_algorithm = draft_model (fits runtime_scheduler's
    ModelExecutor and Speculator); its forward answers what the target's does."""

    def __init__(self, target: TargetRunner[Output], draft: DraftRunner) -> None:
        self.target = target
        self.draft = draft
        self.gate = AcceptanceGate()
        self._filled: dict[str, int] = {}  # rid -> leading positions whose draft KV is right
        self._proposed_at: dict[str, int] = {}  # rid -> the position of its last token when it last proposed

    def forward(self, batch: BatchView) -> Output:
        """The target's forward (the draft catches up when it next proposes)."""
        return self.target.forward(batch)

    def propose(self, requests: Sequence[DraftOffer]) -> list[list[int]]:
        """Up to each request's `max_drafts` greedy draft tokens, as many as the gate lets it take:
        draft step i computes every request still drafting at its position kv_len + i."""
        drafts: list[list[int]] = [[] for _ in requests]
        wanted = [self.gate.drafts_for(r.rid, r.max_drafts) for r in requests]
        active = [i for i, most in enumerate(wanted) if most > 0]
        self._catch_up([requests[i] for i in active])
        for i in active:
            self._proposed_at[requests[i].rid] = requests[i].kv_len
        step = 0
        while active:
            page_size = get_schedule().page_size
            entries: list[DraftBatchRequest] = []
            ids: list[int] = []
            positions: list[int] = []
            locs: list[int] = []
            for i in active:
                r = requests[i]
                position = r.kv_len + step
                ids.append(drafts[i][-1] if step else _last_token(r))
                positions.append(position)
                locs.append(slot_of(r.page_table, position, page_size))
                entries.append(
                    DraftBatchRequest(
                        rid=r.rid,
                        prefix_len=position,
                        extend_len=1,
                        page_table=r.page_table,
                        sample=True,
                        sampling=GREEDY,
                        prompt_ids=r.prompt_ids,
                        output_ids=r.output_ids,
                        state_slot=r.state_slot,
                    )
                )
            batch = DraftBatch(
                forward_mode="decode", input_ids=ids, positions=positions, out_cache_loc=locs, requests=entries
            )
            tokens = self.draft.forward(batch, draft_step=step).next_token_ids
            step += 1
            still: list[int] = []
            for i, token in zip(active, tokens, strict=True):
                if token >= 0:  # a draft that failed to sample just stops proposing
                    drafts[i].append(token)
                    if len(drafts[i]) < wanted[i]:
                        still.append(i)
            active = still
        return drafts

    def verify(self, rid: str, drafts: Sequence[int], samples: Sequence[int]) -> int:
        """The drafts the target accepts (`AcceptanceGate.verify`); the draft now holds the
        positions up to the last accepted draft's input."""
        accepted = self.gate.verify(rid, drafts, samples)
        last = self._proposed_at.pop(rid, None)
        if last is not None and drafts:
            self._filled[rid] = last + min(accepted, len(drafts) - 1) + 1
        return accepted

    def forget(self, rid: str) -> None:
        """Drop what the worker keeps for `rid` (its draft KV is rebuilt if it comes back)."""
        self.gate.forget(rid)
        self._filled.pop(rid, None)
        self._proposed_at.pop(rid, None)

    def _catch_up(self, offers: Sequence[DraftOffer]) -> None:
        """One draft_extend over the positions each offered request's draft lacks: [filled, kv_len)."""
        page_size = get_schedule().page_size
        entries: list[DraftBatchRequest] = []
        ids: list[int] = []
        positions: list[int] = []
        locs: list[int] = []
        for r in offers:
            start = min(self._filled.get(r.rid, 0), r.kv_len)
            if start == r.kv_len:
                continue
            sequence = [*r.prompt_ids, *r.output_ids]
            ids.extend(sequence[start : r.kv_len])
            positions.extend(range(start, r.kv_len))
            locs.extend(slot_of(r.page_table, p, page_size) for p in range(start, r.kv_len))
            entries.append(
                DraftBatchRequest(
                    rid=r.rid,
                    prefix_len=start,
                    extend_len=r.kv_len - start,
                    page_table=r.page_table,
                    sample=False,
                    sampling=GREEDY,
                    prompt_ids=r.prompt_ids,
                    output_ids=r.output_ids,
                    state_slot=r.state_slot,
                )
            )
            self._filled[r.rid] = r.kv_len
        if entries:
            self.draft.fill_kv(
                DraftBatch(
                    forward_mode="draft_extend",
                    input_ids=ids,
                    positions=positions,
                    out_cache_loc=locs,
                    requests=entries,
                )
            )


def _last_token(offer: DraftOffer) -> int:
    """The sequence's last token: the first input of its proposal."""
    return offer.output_ids[-1] if offer.output_ids else offer.prompt_ids[-1]
