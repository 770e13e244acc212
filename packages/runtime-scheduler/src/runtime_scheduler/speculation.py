"""What the scheduler needs from speculative decoding: drafts for its decoding requests, and the
acceptance test that belongs with them.

The scheduler offers its decoding requests to a `Speculator` on a step with no prompt work, with
the KV pages each request's drafts need already given. It sends each request's last token and
its drafts through one target_verify forward, whose samples (`VerifiedView`) the speculator
judges: the request keeps the accepted drafts and the sample after them, and gives back the pages
of the rest. The acceptance test lives with the proposer because it depends on how the drafts
were drawn (spec_workers' proposers draw each draft deterministically, so a draft is accepted
exactly when the target's own sample at its position is that token). The two packages never
import each other; spec_workers' workers fit these protocols structurally.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import msgspec


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
