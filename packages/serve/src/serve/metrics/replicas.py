"""The server's scheduler figures over its data-parallel replicas: each replica reports its own
snapshot, and the server-wide figures /metrics and /server_info show unlabelled are their
combination: counts and totals summed, the KV usage and cache hit rate recomputed over the sums
(a replica with more pages or more admitted tokens weighs more)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from runtime_scheduler import SchedulerMetrics


def combined(stats: Sequence[SchedulerMetrics]) -> SchedulerMetrics:
    """The server-wide snapshot of the replicas' `stats` (one replica: its own)."""
    if len(stats) == 1:
        return stats[0]
    total_pages = sum(s.total_pages for s in stats)
    admitted, cached = sum(s.admitted_tokens for s in stats), sum(s.cached_tokens for s in stats)
    counts = tuple(
        sum(column) for column in itertools.zip_longest(*(s.spec_accept_length_counts for s in stats), fillvalue=0)
    )
    return SchedulerMetrics(
        num_running=sum(s.num_running for s in stats),
        num_waiting=sum(s.num_waiting for s in stats),
        total_pages=total_pages,
        free_pages=sum(s.free_pages for s in stats),
        cached_pages=sum(s.cached_pages for s in stats),
        evictable_pages=sum(s.evictable_pages for s in stats),
        token_usage=sum(s.token_usage * s.total_pages for s in stats) / total_pages if total_pages else 0.0,
        admitted_tokens=admitted,
        cached_tokens=cached,
        cache_hit_rate=cached / admitted if admitted else 0.0,
        num_retractions=sum(s.num_retractions for s in stats),
        num_finished=sum(s.num_finished for s in stats),
        num_aborted=sum(s.num_aborted for s in stats),
        num_failed=sum(s.num_failed for s in stats),
        spec_verify_steps=sum(s.spec_verify_steps for s in stats),
        spec_draft_tokens=sum(s.spec_draft_tokens for s in stats),
        spec_accepted_tokens=sum(s.spec_accepted_tokens for s in stats),
        spec_accept_length_counts=counts,
        num_grammar_waiting=sum(s.num_grammar_waiting for s in stats),
        grammar_compiles=sum(s.grammar_compiles for s in stats),
        grammar_cache_hits=sum(s.grammar_cache_hits for s in stats),
        grammar_compile_seconds=sum(s.grammar_compile_seconds for s in stats),
    )
