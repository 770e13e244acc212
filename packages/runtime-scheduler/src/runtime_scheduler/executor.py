"""What the scheduler needs from the model: one `forward` per step, its results request by request."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from runtime_scheduler.batch import ForwardBatch


class ForwardOutputView(Protocol):
    """A forward's results, each sequence in batch order (the runner's `ForwardOutput` fits)."""

    @property
    def next_token_ids(self) -> Sequence[int]: ...  # -1 where the request's `sample` was False
    @property
    def next_token_logprobs(self) -> Sequence[float | None]: ...  # None unless the request asked
    @property
    def top_logprobs(self) -> Sequence[Sequence[tuple[int, float]] | None]: ...  # None unless asked


class ModelExecutor(Protocol):
    """Computes a batch: writes each input token's KV to its slot and samples where asked."""

    def forward(self, batch: ForwardBatch) -> ForwardOutputView:
        """One result per request of `batch.requests`, in the same order."""
        ...
