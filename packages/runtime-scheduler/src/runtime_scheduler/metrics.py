"""What the server reports about the scheduler: a frozen snapshot."""

from __future__ import annotations

import msgspec


class SchedulerMetrics(msgspec.Struct, frozen=True, kw_only=True):
    """Counts at one moment, and totals since the scheduler was built."""

    num_running: int
    num_waiting: int
    total_pages: int
    free_pages: int
    cached_pages: int  # held by the prefix cache, locked or not
    evictable_pages: int  # cached pages no running request uses
    token_usage: float  # fraction of the pool neither free nor evictable
    admitted_tokens: int  # sequence tokens looked up in the cache at admission (total)
    cached_tokens: int  # of those, served from the cache (total)
    cache_hit_rate: float  # cached_tokens / admitted_tokens (0 before any admission)
    num_retractions: int
    num_finished: int
    num_aborted: int
    num_failed: int = 0  # requests that failed while being served (not counted as finished or aborted)
    spec_verify_steps: int = 0  # target_verify forwards run (speculative decoding; total)
    spec_draft_tokens: int = 0  # drafts proposed and verified (total)
    spec_accepted_tokens: int = 0  # of those, accepted (total)
    # request verifies by accept length (tokens one verify gave a request: accepted drafts plus the
    # target's own next token): entry n counts the verifies that gave n tokens; entry 0 is unused
    spec_accept_length_counts: tuple[int, ...] = ()
