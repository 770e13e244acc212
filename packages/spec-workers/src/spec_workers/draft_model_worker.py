"""Speculation by a draft model: a second runner on a small checkpoint proposes each request's
next tokens greedily, and the target verifies them.

The worker is both the scheduler's executor and its speculator. As the executor it runs the
target's forward and keeps the draft's KV cache in step with the target's: the draft runner's pool
has the target's slots, so the scheduler's page tables index both. What the draft needs before a
proposal for a request whose last token sits at position L is its KV at every position < L:
- a prompt chunk, a mixed step or a plain decode of the target is mirrored on the draft
  (`fill_kv`: the layers only, no LM head);
- a proposal of k drafts writes the draft's KV at L .. L+k-1 (inputs: the last token, then the
  drafts); after a verify that accepted a of them, positions up to L+a hold the right inputs;
- when every draft was accepted (a == k), position L+k (input: the last draft) is the one the
  draft lacks: a draft_extend of that one position fills it, right after the verify.
Proposal step i is a decode on the draft runner planned as draft step i (the draft backend
factory's multi-step container gives each step its own backend). Every page-size read is the
published schedule's, at the moment of use.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

from config_bags import get_schedule

from spec_workers.acceptance import accepted_count_of
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
        self.proposal_steps = 0  # draft forwards run to propose (for /server_info)

    def forward(self, batch: BatchView) -> Output:
        """The target's forward; then the draft's cache is brought in step with the target's."""
        output = self.target.forward(batch)
        if batch.forward_mode == "target_verify":
            self._fill_fully_accepted(batch, output)
        else:
            self.draft.fill_kv(batch)
        return output

    def propose(self, requests: Sequence[DraftOffer]) -> list[list[int]]:
        """Up to each request's `max_drafts` greedy draft tokens (none where the gate pauses it):
        draft step i computes every request still drafting at its position kv_len + i."""
        drafts: list[list[int]] = [[] for _ in requests]
        active = [i for i, r in enumerate(requests) if r.max_drafts > 0 and self.gate.allows(r.rid)]
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
                entries.append(DraftBatchRequest(rid=r.rid, prefix_len=position, extend_len=1, page_table=r.page_table, sample=True,
                                                 sampling=GREEDY, prompt_ids=r.prompt_ids, output_ids=r.output_ids))
            batch = DraftBatch(forward_mode="decode", input_ids=ids, positions=positions, out_cache_loc=locs, requests=entries)
            tokens = self.draft.forward(batch, draft_step=step).next_token_ids
            self.proposal_steps += 1
            step += 1
            still: list[int] = []
            for i, token in zip(active, tokens, strict=True):
                if token >= 0:  # a draft that failed to sample just stops proposing
                    drafts[i].append(token)
                    if len(drafts[i]) < requests[i].max_drafts:
                        still.append(i)
            active = still
        return drafts

    def verify(self, rid: str, drafts: Sequence[int], samples: Sequence[int]) -> int:
        """The drafts the target accepts (`AcceptanceGate.verify`)."""
        return self.gate.verify(rid, drafts, samples)

    def forget(self, rid: str) -> None:
        """Drop what the gate keeps for `rid`."""
        self.gate.forget(rid)

    def _fill_fully_accepted(self, batch: BatchView, output: OutputView) -> None:
        """Extend the draft by the one position it lacks after a verify that accepted all of a
        request's drafts: the last draft's, whose KV only the target wrote."""
        verified = output.verified
        if verified is None:
            raise RuntimeError("the target answered a target_verify batch without its samples (ForwardOutput.verified)")
        entries: list[DraftBatchRequest] = []
        ids: list[int] = []
        positions: list[int] = []
        locs: list[int] = []
        start = 0
        for r, samples in zip(batch.requests, verified, strict=True):
            drafts = batch.input_ids[start + 1 : start + r.extend_len]
            if drafts and len(samples.token_ids) == len(drafts) + 1 and accepted_count_of(drafts, samples.token_ids) == len(drafts):
                last = start + r.extend_len - 1
                ids.append(batch.input_ids[last])
                positions.append(batch.positions[last])
                locs.append(batch.out_cache_loc[last])
                entries.append(DraftBatchRequest(rid=r.rid, prefix_len=batch.positions[last], extend_len=1, page_table=r.page_table,
                                                 sample=False, sampling=GREEDY, prompt_ids=r.prompt_ids, output_ids=r.output_ids))
            start += r.extend_len
        if entries:
            self.draft.fill_kv(DraftBatch(forward_mode="draft_extend", input_ids=ids, positions=positions, out_cache_loc=locs,
                                          requests=entries))


def _last_token(offer: DraftOffer) -> int:
    """The sequence's last token: the first input of its proposal."""
    return offer.output_ids[-1] if offer.output_ids else offer.prompt_ids[-1]
