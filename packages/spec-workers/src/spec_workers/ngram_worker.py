"""Speculation by prompt lookup: each request's drafts come from its own prompt and output so far."""

from __future__ import annotations

from collections.abc import Sequence

from config_bags.server import get_spec
from spec_workers.acceptance_gate import AcceptanceGate
from spec_workers.batch_view import DraftOffer
from spec_workers.ngram import ngram_draft_of


class NgramWorker:
    """The scheduler's speculator for speculative_algorithm = ngram (fits runtime_scheduler.Speculator)."""

    def __init__(self) -> None:
        self.gate = AcceptanceGate()

    def propose(self, requests: Sequence[DraftOffer]) -> list[list[int]]:
        """Each request's n-gram drafts (windows read now), as many as the gate lets it take."""
        spec = get_spec()
        return [
            ngram_draft_of([*r.prompt_ids, *r.output_ids], spec, self.gate.drafts_for(r.rid, r.max_drafts))
            for r in requests
        ]

    def verify(self, rid: str, drafts: Sequence[int], samples: Sequence[int]) -> int:
        """The drafts the target accepts (`AcceptanceGate.verify`)."""
        return self.gate.verify(rid, drafts, samples)

    def forget(self, rid: str) -> None:
        """Drop what the gate keeps for `rid`."""
        self.gate.forget(rid)
