"""Admission decisions: whether a request can ever run, in which order waiting requests are
tried, and how many prompt tokens one step gives a request."""

from __future__ import annotations

from collections.abc import Sequence

from config_bags.server import get_schedule
from config_bags.server.bags.schedule import SchedulePolicy
from runtime_scheduler.radix_cache import RadixCache
from runtime_scheduler.request import Request
from runtime_scheduler.request_state import RequestState


def refusal_reason(
    req: Request, context_length: int, pool_tokens: int, waiting: int, max_queued: int | None
) -> str | None:
    """Why `req` must be refused now, or None when it can be queued."""
    n = len(req.prompt_ids)
    if n >= context_length:
        return (
            f"prompt has {n} tokens but the context length is {context_length}; a prompt may have at most "
            f"{context_length - 1} tokens (one position is kept for the first new token)"
        )
    if n > pool_tokens:
        return (
            f"prompt has {n} tokens but the whole KV pool holds {pool_tokens}; a prompt may have at most {pool_tokens}"
        )
    if max_queued is not None and waiting >= max_queued:
        return f"the waiting queue is full ({waiting} requests, max_queued_requests={max_queued}); retry later"
    return None


def admission_order(
    waiting: Sequence[RequestState], policy: SchedulePolicy, cache: RadixCache
) -> Sequence[RequestState]:
    """Waiting requests in the order admission tries them: fcfs keeps arrival order; lpm puts the
    longest cached prefix first (arrival order among equals)."""
    if policy == "fcfs":
        return waiting
    return sorted(waiting, key=lambda s: -cache.cached_prefix_len(s.fill_ids(s.fill_len - 1)))


def extend_len_of(remaining: int, chunk: int | None, budget: int, first: bool) -> int:
    """Tokens to compute this step for a request with `remaining` uncomputed tokens.

    A chunk is at most `chunk` tokens (None: no chunking). Past the step's prefill `budget` a
    chunk is cut down to whole pages of what is left; the step's first extend always gets at
    least one page (or, without chunking, its whole prompt) so that a large prompt is never
    starved. 0 means: admit nothing more this step.
    """
    ext = remaining if chunk is None else min(remaining, chunk)
    if ext <= budget:
        return ext
    if chunk is None:
        return ext if first else 0
    page_size = get_schedule().page_size
    cut = max(budget, 0) // page_size * page_size
    if cut == 0:
        return min(ext, page_size) if first else 0
    return min(ext, cut)
