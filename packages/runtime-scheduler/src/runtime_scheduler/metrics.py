"""What the server reports about the scheduler: a frozen snapshot."""

from __future__ import annotations

from dataclasses import dataclass

import msgspec

from runtime_scheduler.kv_memory import KvMemory


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
    state_snapshot_slots: int = 0  # a hybrid model's snapshot pool (0: it keeps no snapshots)
    state_snapshots_held: int = 0  # of those, holding a cached prefix's state now
    state_snapshots_taken: int = 0  # snapshots attached to the cache (total)
    state_snapshots_dropped: int = 0  # snapshots dropped for newer ones (total; evicted nodes not counted)
    num_grammar_waiting: int = 0  # queued requests whose grammar is still compiling
    grammar_compiles: int = 0  # output constraints compiled (total; cache misses)
    grammar_cache_hits: int = 0  # constrained requests served from an already compiled grammar (total)
    grammar_compile_seconds: float = 0.0  # time spent compiling grammars (total)


@dataclass
class Tally:
    """A scheduler's running totals since it was built."""

    admitted_tokens: int = 0
    cached_tokens: int = 0
    retractions: int = 0
    finished: int = 0
    aborted: int = 0
    failed: int = 0

    def snapshot(self, memory: KvMemory, *, running: int, waiting: int) -> SchedulerMetrics:
        """These totals with the pool's and the queues' counts now."""
        allocator, cache, snapshots = memory.allocator, memory.cache, memory.snapshots
        total = allocator.num_pages
        return SchedulerMetrics(
            state_snapshot_slots=0 if snapshots is None else snapshots.allocator.num_pages,
            state_snapshots_held=0 if snapshots is None else len(snapshots.nodes),
            state_snapshots_taken=0 if snapshots is None else snapshots.taken,
            state_snapshots_dropped=0 if snapshots is None else snapshots.dropped,
            num_running=running,
            num_waiting=waiting,
            total_pages=total,
            free_pages=allocator.free_count,
            cached_pages=cache.cached_pages,
            evictable_pages=cache.evictable_pages,
            token_usage=(total - allocator.free_count - cache.evictable_pages) / total,
            admitted_tokens=self.admitted_tokens,
            cached_tokens=self.cached_tokens,
            cache_hit_rate=self.cached_tokens / self.admitted_tokens if self.admitted_tokens else 0.0,
            num_retractions=self.retractions,
            num_finished=self.finished,
            num_aborted=self.aborted,
            num_failed=self.failed,
        )
