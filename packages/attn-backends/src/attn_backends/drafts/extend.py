"""The draft runner's extend backend: the prefill-half backend, counting the query tokens it served.

A draft runner catches up before it proposes (draft_extend): the prompt the first time, then the
positions the target computed while the request did not speculate, or the one after a verify that
accepted every draft; a runner's warm-up extends too. All of that attends through the
prefill-half backend this wraps; the count is the draft's extend work.
"""

from __future__ import annotations

from attn_backends.backend import AttentionBackend
from attn_backends.backends.wrapper import WrapperBackend
from attn_backends.metadata import AttentionMetadataView


class DraftExtendBackend(WrapperBackend):
    """The wrapped prefill-half backend's plan and attention; `extended_tokens` counts the query
    tokens of every forward planned (its stamp is the wrapped backend's)."""

    def __init__(self, wrapped: AttentionBackend) -> None:
        super().__init__(wrapped)
        self.extended_tokens = 0

    def plan(self, metadata: AttentionMetadataView) -> None:
        """The wrapped backend's plan; then the forward's query tokens are counted (a refused plan counts nothing)."""
        super().plan(metadata)
        self.extended_tokens += metadata.num_tokens
