"""What the scheduler tells the server: per-request step events and admission refusals."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from runtime_scheduler.request import FinishReason
from runtime_scheduler.request_state import RequestState


class RequestEvent(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What happened to one request in one step.

    A sampled token comes with its logprob (and the top alternatives when asked for). A request
    that finishes carries its finish reason in the same event; a request that can no longer grow
    because the whole pool holds only itself finishes with reason "length" and no token.
    `cached_tokens` is how many prompt tokens the prefix cache supplied when it was first admitted.
    A request that failed while being served (its sampling raised, or its step's forward did)
    finishes with reason "abort", no token, and `error` saying why; its pages are freed.
    """

    rid: str
    token_id: int | None
    logprob: float | None
    top_logprobs: tuple[tuple[int, float], ...] | None
    finish_reason: FinishReason | None
    cached_tokens: int
    error: str | None = None


def event_of(
    state: RequestState,
    finish_reason: FinishReason | None,
    *,
    token: int | None = None,
    logprob: float | None = None,
    top: Sequence[tuple[int, float]] | None = None,
    error: str | None = None,
) -> RequestEvent:
    """`state`'s event of this step: a sampled token with its logprobs, or (no token) how it ended."""
    return RequestEvent(
        rid=state.req.rid,
        token_id=token,
        logprob=logprob,
        top_logprobs=None if top is None else tuple(top),
        finish_reason=finish_reason,
        cached_tokens=state.cached_tokens or 0,
        error=error,
    )


class Refusal(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """Why a request was not accepted; the request left no trace in the scheduler."""

    rid: str
    reason: str
