"""Speculative decoding in the scheduler: what it needs from a speculator (drafts for its decoding
requests, and the acceptance test that belongs with them), and its own side of it.

The scheduler offers its decoding requests to a `Speculator` on a step with no prompt work, with
the KV pages each request's drafts need already given. It sends each request's last token and
its drafts through one target_verify forward, whose samples (`VerifiedView`) the speculator
judges: the request keeps the accepted drafts and the sample after them, and gives back the pages
of the rest. The acceptance test lives with the proposer because it depends on how the drafts
were drawn (spec_workers' proposers draw each draft deterministically, so a draft is accepted
exactly when the target's own sample at its position is that token). The two packages never
import each other; spec_workers' workers fit these protocols structurally.

`SpeculativeDecoding` is the scheduler's side of it: what each decoding request is offered, the
pages its drafts take and give back, how a verify step's samples are judged, and the acceptance
counts. The scheduler keeps the requests themselves: it appends and reports what a judgement
keeps, and fails, finishes or retracts requests (telling the speculator to forget them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgspec

from config_bags.server import get_schedule, get_spec, max_speculative_num_draft_tokens
from runtime_scheduler.executor import VerifiedView
from runtime_scheduler.kv_memory import KvMemory, pages_for
from runtime_scheduler.metrics import SchedulerMetrics
from runtime_scheduler.request_state import RequestState


class DraftRequest(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One decoding request offered drafts: tokens [0, kv_len) have KV, the sequence's last token
    (at position kv_len) is the verify's first input, and up to `max_drafts` tokens may follow it.
    `page_table` covers positions [0, kv_len + max_drafts]; like a batch's, it is the request's
    own list: exact during `propose`, not to be kept."""

    rid: str
    kv_len: int
    max_drafts: int
    page_table: Sequence[int]
    prompt_ids: Sequence[int]
    output_ids: Sequence[int]
    state_slot: int = -1  # a hybrid model's recurrent-state slot (-1 without one)


class Speculator(Protocol):
    """Proposes drafts and judges them against the target's samples."""

    def propose(self, requests: Sequence[DraftRequest]) -> Sequence[Sequence[int]]:
        """Each request's drafts (at most its `max_drafts`; empty: it decodes plainly this step)."""
        ...

    def verify(self, rid: str, drafts: Sequence[int], samples: Sequence[int]) -> int:
        """How many of `drafts` the target accepts, given its samples at each verify position
        (one more than the drafts); the speculator also records it for the request's history."""
        ...

    def forget(self, rid: str) -> None:
        """Request `rid` left the scheduler, or was retracted (its pages freed): drop whatever the
        speculator keeps for it."""
        ...


class SpeculativeDecoding:
    """One scheduler's speculative decoding through `speculator`, over the scheduler's `memory` (a
    scheduler has one exactly when spec.speculative_algorithm is set)."""

    def __init__(self, speculator: Speculator, memory: KvMemory) -> None:
        self._speculator = speculator
        self._memory = memory
        self._verify_steps = 0
        self._draft_tokens = 0
        self._accepted_tokens = 0
        self._accept_lengths = [0]  # entry n: the request verifies that gave n tokens

    def forget(self, rid: str) -> None:
        """Request `rid` left the scheduler or was retracted (its pages freed): the speculator drops
        what it keeps for it."""
        self._speculator.forget(rid)

    def drafts_for(self, decodes: Sequence[RequestState], context: int) -> list[list[int]] | None:
        """Each decode's drafts for a verify step, or None when none got any (the step decodes
        plainly, as does a step decoding more than spec.speculative_disable_by_batch_size requests,
        where the verify's extra rows cost more than they give). A request is offered as many as
        spec's budget (and its even share of spec.speculative_max_drafts_per_step, at least one),
        its remaining new tokens and the `context` length leave, and the pages the pool can give now
        (evicting the cache, never retracting); the pages of drafts the speculator did not propose
        go back at once."""
        spec = get_spec()
        budget = max_speculative_num_draft_tokens() - 1
        limit = spec.speculative_disable_by_batch_size
        if budget <= 0 or (limit is not None and len(decodes) > limit):
            return None
        if spec.speculative_max_drafts_per_step is not None:
            budget = min(budget, max(1, spec.speculative_max_drafts_per_step // len(decodes)))
        offers: list[DraftRequest] = []
        for s in decodes:
            room = min(budget, s.req.stop.max_new_tokens - len(s.output_ids) - 1, context - s.fill_len)
            if s.grammar is not None:  # a constrained request decodes plainly (grammar.py says why)
                room = 0
            if room > 0:
                room = self._reserve_draft_pages(s, room)
            offers.append(
                DraftRequest(
                    rid=s.req.rid,
                    kv_len=s.kv_len,
                    max_drafts=max(room, 0),
                    page_table=s.page_table,
                    prompt_ids=s.req.prompt_ids,
                    output_ids=s.output_ids,
                    state_slot=-1 if s.state_slot is None else s.state_slot,
                )
            )
        wanted = [o for o in offers if o.max_drafts > 0]
        proposed = list(self._speculator.propose(wanted)) if wanted else []
        if len(proposed) != len(wanted):
            raise RuntimeError(
                f"the speculator answered {len(proposed)} draft lists for {len(wanted)} requests; "
                "accepted: one per request"
            )
        answers = iter(proposed)
        drafts = [_checked_drafts(o, next(answers)) if o.max_drafts > 0 else [] for o in offers]
        for s, d in zip(decodes, drafts, strict=True):
            keep = pages_for(s.kv_len + 1 + len(d))
            self._memory.allocator.free(s.page_table[keep:])
            del s.page_table[keep:]
        return drafts if any(drafts) else None

    def judge(
        self,
        decodes: Sequence[RequestState],
        drafts: Sequence[list[int]],
        verified: Sequence[VerifiedView],
        errors: Sequence[str | None],
    ) -> list[int | str]:
        """For each decode of a verify step, how many of its samples it keeps (those at the drafts the
        speculator accepts, and the one after them), or why it fails: the executor's error, or an
        acceptance its drafts cannot give. Counted for the metrics."""
        self._verify_steps += 1
        kept: list[int | str] = []
        for s, own, samples, error in zip(decodes, drafts, verified, errors, strict=True):
            if error is not None:
                kept.append(error)
                continue
            accepted = self._speculator.verify(s.req.rid, own, samples.token_ids) if own else 0
            if not 0 <= accepted <= len(own):
                kept.append(
                    f"request failed: the speculator accepted {accepted} of its {len(own)} drafts; "
                    f"accepted: 0..{len(own)}"
                )
                continue
            if own:
                self._draft_tokens += len(own)
                self._accepted_tokens += accepted
                while len(self._accept_lengths) <= accepted + 1:
                    self._accept_lengths.append(0)
                self._accept_lengths[accepted + 1] += 1
            kept.append(accepted + 1)
        return kept

    def counted_in(self, metrics: SchedulerMetrics) -> SchedulerMetrics:
        """`metrics` with the verify steps, drafts and acceptance counted so far."""
        return msgspec.structs.replace(
            metrics,
            spec_verify_steps=self._verify_steps,
            spec_draft_tokens=self._draft_tokens,
            spec_accepted_tokens=self._accepted_tokens,
            spec_accept_length_counts=tuple(self._accept_lengths),
        )

    def _reserve_draft_pages(self, s: RequestState, room: int) -> int:
        """Give `s` the pages for `room` drafts after its last token, or as many drafts as its
        pages and the pool hold; how many drafts that is."""
        page_size = get_schedule().page_size
        held = len(s.page_table) * page_size - s.kv_len - 1  # drafts the request's pages hold already
        if room <= held:
            return room
        extra = pages_for(s.kv_len + 1 + room) - len(s.page_table)
        extra = min(extra, self._memory.available_pages())
        if extra > 0 and self._memory.ensure_free(extra):
            s.page_table.extend(self._memory.allocator.alloc(extra))
        return min(room, len(s.page_table) * page_size - s.kv_len - 1)


def check_verify_answer(verified: Sequence[VerifiedView] | None, drafts: Sequence[Sequence[int]]) -> None:
    """Refuse (RuntimeError, failing the step) a verify answer that does not give each request one
    sample per input token: its last token and each of its `drafts`."""
    lengths = [1 + len(d) for d in drafts]
    got = None if verified is None else [len(v.token_ids) for v in verified]
    if got != lengths:
        raise RuntimeError(
            f"the executor answered a target_verify batch with samples of lengths {got}; accepted: "
            f"{lengths} (one per input token of each request)"
        )


def _checked_drafts(offer: DraftRequest, drafts: Sequence[int]) -> list[int]:
    """A speculator's drafts for `offer`, refused (failing the step) when they break its offer."""
    own = list(drafts)
    if len(own) > offer.max_drafts or any(not isinstance(t, int) or t < 0 for t in own):
        raise RuntimeError(
            f"the speculator proposed {own[:8]} for request {offer.rid!r}; accepted: at most "
            f"{offer.max_drafts} token ids >= 0"
        )
    return own


def speculative_decoding_of(speculator: Speculator | None, memory: KvMemory) -> SpeculativeDecoding | None:
    """A scheduler's speculative decoding: one exactly when spec.speculative_algorithm is set (a cold
    leaf), and then through `speculator`; None without. A speculator handed where the leaf is unset,
    or none where it is set, is refused."""
    algorithm = get_spec().speculative_algorithm
    if (algorithm is None) != (speculator is None):
        raise ValueError(
            f"spec.speculative_algorithm is {algorithm!r} but the scheduler was "
            f"{'given no' if speculator is None else 'given a'} speculator; accepted: a speculator exactly when it "
            "is set"
        )
    return None if speculator is None else SpeculativeDecoding(speculator, memory)
