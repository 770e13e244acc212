"""What the scheduler needs from the model: one `forward` per step, one result per request."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from runtime_scheduler.batch import ForwardBatch


class TokenOutput(Protocol):
    """One request's result of a forward."""

    @property
    def token_id(self) -> int: ...  # -1 where the request's `sample` was False
    @property
    def logprob(self) -> float: ...
    @property
    def top_logprobs(self) -> Sequence[tuple[int, float]] | None: ...


class ModelExecutor(Protocol):
    """Computes a batch: writes each input token's KV to its slot and samples where asked."""

    def forward(self, batch: ForwardBatch) -> Sequence[TokenOutput]:
        """One result per request of `batch.requests`, in the same order."""
        ...
