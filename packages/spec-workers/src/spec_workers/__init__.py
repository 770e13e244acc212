"""spec-workers: speculative decoding's proposers and their acceptance test.

    worker = NgramWorker()                      # prompt lookup; the scheduler's speculator
    worker = DraftModelWorker(target, draft)    # a draft runner; executor and speculator both
    Scheduler(executor, ..., speculator=worker)

Drafts are drawn deterministically (the n-gram lookup, the draft's argmax), so a draft is
accepted exactly when the target's own sample at its position is that token (`acceptance`): the
output distribution is the target's, token for token for greedy and seeded requests. A request
drafts longer while its drafts are accepted and shorter once they are not, and one whose drafts
keep being rejected pauses speculating (`acceptance_gate`). Every spec leaf is read
from the published bag at use.
"""

from spec_workers.acceptance import accepted_count_of
from spec_workers.acceptance_gate import AcceptanceGate, low_acceptance_of, next_draft_length_of
from spec_workers.draft_model_worker import DraftModelWorker
from spec_workers.ngram import ngram_draft, ngram_draft_of
from spec_workers.ngram_worker import NgramWorker

__all__ = [
    "AcceptanceGate",
    "DraftModelWorker",
    "NgramWorker",
    "accepted_count_of",
    "low_acceptance_of",
    "next_draft_length_of",
    "ngram_draft",
    "ngram_draft_of",
]
