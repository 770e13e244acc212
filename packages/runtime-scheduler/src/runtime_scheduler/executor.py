"""What the scheduler needs from the model: one `forward` per step, its results request by request,
and which of its failures the process cannot survive.

How a failure is attributed (the scheduler decides, at the moment of the failure):
- a request whose entry in `ForwardOutputView.errors` is a message failed alone (its sampling
  raised, say): the scheduler fails it and advances the rest of the batch;
- an `Exception` raised by `forward` (or a malformed answer) failed the whole step: the scheduler
  fails that step's requests and goes on serving;
- an unrecoverable fault (`is_unrecoverable`) propagates out of `Scheduler.step` after the step's
  page allocations are undone, and the serving process ends as it must.

The scheduler imports no torch, so an executor marks its own device faults structurally: an
exception whose `unrecoverable` attribute is True (the runner's `DeviceFaultError` is one, raised
from torch's out-of-memory and CUDA errors). A MemoryError, and a BaseException that is not an
Exception (KeyboardInterrupt, SystemExit), are unrecoverable whoever raised them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from runtime_scheduler.batch import ForwardBatch


class VerifiedView(Protocol):
    """A verify request's samples, one per input token (the runner's `PositionSamples` fits)."""

    @property
    def token_ids(self) -> Sequence[int]: ...
    @property
    def logprobs(self) -> Sequence[float | None]: ...
    @property
    def top_logprobs(self) -> Sequence[Sequence[tuple[int, float]] | None]: ...


class ForwardOutputView(Protocol):
    """A forward's results, each sequence in batch order (the runner's `ForwardOutput` fits).
    A target_verify forward also answers `verified`, each request's samples at every position."""

    @property
    def next_token_ids(self) -> Sequence[int]: ...  # -1 where the request's `sample` was False or it failed
    @property
    def next_token_logprobs(self) -> Sequence[float | None]: ...  # None unless the request asked
    @property
    def top_logprobs(self) -> Sequence[Sequence[tuple[int, float]] | None]: ...  # None unless asked
    @property
    def errors(self) -> Sequence[str | None]: ...  # why the request failed this step (a sentence), else None
    @property
    def verified(self) -> Sequence[VerifiedView] | None: ...  # target_verify only, else None


class ModelExecutor(Protocol):
    """Computes a batch: writes each input token's KV to its slot and samples where asked."""

    def forward(self, batch: ForwardBatch) -> ForwardOutputView:
        """One result per request of `batch.requests`, in the same order."""
        ...


def check_answer(output: ForwardOutputView, requests: int) -> None:
    """Refuse (RuntimeError, failing the step) an answer that does not give a token id, a logprob,
    top logprobs and an error entry for each of the batch's `requests`."""
    answers = (output.next_token_ids, output.next_token_logprobs, output.top_logprobs, output.errors)
    counts = tuple(len(answer) for answer in answers)
    if counts != (requests,) * 4:
        raise RuntimeError(
            f"the executor returned (token ids, logprobs, top logprobs, errors) of lengths {counts} for a batch "
            f"of {requests} requests; accepted: one of each per request, in batch order"
        )


def is_unrecoverable(error: BaseException) -> bool:
    """Whether `error`, raised by an executor's `forward`, leaves the process unable to go on."""
    if not isinstance(error, Exception) or isinstance(error, MemoryError):
        return True
    return getattr(error, "unrecoverable", False) is True
