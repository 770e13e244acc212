"""spec-workers: speculative decoding proposers. The n-gram proposer reads the spec bag at use."""

from spec_workers.ngram import ngram_draft, ngram_draft_of

__all__ = ["ngram_draft", "ngram_draft_of"]
