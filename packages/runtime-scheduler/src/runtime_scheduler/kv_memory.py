"""KV slot bookkeeping for requests: the page allocator and the radix prefix cache together.

Every page is in exactly one place: the allocator's free list, a running request's own pages
(`page_table[cached_pages:]`), or the radix cache. These methods move pages between the three
and keep the cache's lock counts in step with the requests that use its nodes.

A hybrid model (linear-attention layers) also keeps a recurrent state per running request: with
`state_slots`, admission takes one of that many state slots and releasing gives it back. Its
requests resume after a cached prefix only where a snapshot of the recurrent state was kept
(`snapshot_slots`, state_snapshots.py says how); without snapshots a hybrid's request computes its
whole prompt (its full pages still enter the cache, where they are evictable).

The page size is read from the published bags at each use. It is cold (fixed once serving
begins), but before `begin_serving()` an override or a new publish can still change it under a
built pool: `check_page_size` refuses that before a step or an abort touches the pages.
"""

from __future__ import annotations

from config_bags.server import get_exec, get_schedule
from runtime_scheduler.page_allocator import PageAllocator
from runtime_scheduler.radix_cache import RadixCache, RadixNode
from runtime_scheduler.request_state import RequestState
from runtime_scheduler.state_snapshots import StateSnapshots


def pages_for(tokens: int) -> int:
    """Pages needed to hold `tokens` tokens."""
    return -(-tokens // get_schedule().page_size)


class KvMemory:
    """The pool's pages and the prefix cache over them: `pool_slots // page_size` pages over the
    executor's `pool_slots` KV slots."""

    def __init__(self, pool_slots: int, *, state_slots: int = 0, snapshot_slots: int = 0) -> None:
        page_size = get_schedule().page_size
        if pool_slots < page_size:
            raise ValueError(
                f"max_total_tokens={pool_slots} is not accepted; accepted: at least one page ({page_size} slots)"
            )
        if state_slots < 0:
            raise ValueError(
                f"state_slots={state_slots} is not accepted; accepted: 0 (no recurrent state) or the slots of the "
                "runner's state pool"
            )
        if snapshot_slots < 0 or (snapshot_slots and not state_slots):
            raise ValueError(
                f"snapshot_slots={snapshot_slots} is not accepted; accepted: 0, or the slots of a hybrid runner's "
                "snapshot pool (with state_slots)"
            )
        self.pool_slots = pool_slots
        self.allocator = PageAllocator(pool_slots // get_schedule().page_size)
        self.states = PageAllocator(state_slots, "recurrent-state slots") if state_slots > 0 else None
        self.snapshots = StateSnapshots(snapshot_slots) if snapshot_slots > 0 else None
        self.cache = RadixCache(on_evict=None if self.snapshots is None else self.snapshots.detach)

    def check_page_size(self) -> None:
        """Refuse (RuntimeError) a published page size that no longer cuts the pool into the pages
        it was built with: every page table and cached key would be read at the wrong granularity,
        and a page could address slots beyond the executor's pool."""
        page_size = get_schedule().page_size
        if self.pool_slots // page_size != self.allocator.num_pages:
            raise RuntimeError(
                f"page_size is now {page_size} but the KV pool was built as {self.allocator.num_pages} pages "
                f"over {self.pool_slots} slots; page_size is cold: set it before the scheduler is built"
            )

    @property
    def reuses_prefixes(self) -> bool:
        """Whether an admitted request resumes after its cached prefix (a hybrid's only with snapshots)."""
        return self.states is None or self.snapshots is not None

    def can_admit(self) -> bool:
        """Whether a request can be admitted now as far as state slots go (always without them)."""
        return self.states is None or self.states.free_count > 0

    def available_pages(self) -> int:
        """Pages free now or freeable by evicting the cache."""
        return self.allocator.free_count + self.cache.evictable_pages

    def ensure_free(self, count: int) -> bool:
        """Evict cache leaves until `count` pages are free; whether that many are free now."""
        missing = count - self.allocator.free_count
        if missing > 0:
            self.allocator.free(self.cache.evict(missing))
        return self.allocator.free_count >= count

    def attach_prefix(self, state: RequestState) -> None:
        """Give a waiting request the cached prefix of its sequence (locked), leaving at least one
        token to compute so that the step that computes it can sample the next token; with state
        slots, one state slot (the caller checked `can_admit`) and no cached prefix."""
        if self.states is not None:
            (state.state_slot,) = self.states.alloc(1)
        match = self.cache.match_prefix(state.fill_ids(state.fill_len - 1) if self.reuses_prefixes else ())
        node, pages = match.node, match.pages
        if self.snapshots is not None:
            # A hybrid resumes where its recurrent state was kept: the deepest snapshot of its match.
            resume = self.snapshots.resume_node(node)
            node = self.cache.root if resume is None else resume
            pages = pages[: _prefix_pages(node)]
            if resume is not None:
                state.restore_from = resume.snapshot
                self.snapshots.pin(resume.snapshot)
        self.cache.lock(node)
        state.node = node
        state.page_table = pages
        state.cached_pages = len(pages)
        state.kv_len = len(pages) * get_schedule().page_size

    def detach_prefix(self, state: RequestState) -> None:
        """Undo `attach_prefix` for a request that was not admitted after all."""
        assert state.node is not None and state.cached_pages == len(state.page_table)
        self._give_back_state_slot(state)
        self.restored(state)
        self.cache.unlock(state.node)
        state.node = None
        state.page_table = []
        state.cached_pages = 0
        state.kv_len = 0

    def grow(self, state: RequestState, tokens: int) -> None:
        """Allocate the pages that let `state` hold `tokens` tokens (the caller ensured they are free)."""
        missing = pages_for(tokens) - len(state.page_table)
        if missing > 0:
            state.page_table.extend(self.allocator.alloc(missing))

    def shrink_to_computed(self, state: RequestState) -> None:
        """Free the pages `state` was given beyond its computed tokens (a step that failed)."""
        keep = pages_for(state.kv_len)
        self.allocator.free(state.page_table[keep:])
        del state.page_table[keep:]

    def commit(self, state: RequestState) -> None:
        """Hand the request's computed full pages to the cache. Where the cache already held the
        same tokens (another request computed them), the request's duplicate pages are freed and
        it uses the cache's instead."""
        page_size = get_schedule().page_size
        full = state.kv_len // page_size
        if full <= state.cached_pages:
            return
        table = state.page_table
        match = self.cache.insert(state.fill_ids(full * page_size), table[:full])
        duplicates = []
        for i in range(state.cached_pages, full):
            if match.pages[i] != table[i]:
                duplicates.append(table[i])
                table[i] = match.pages[i]
        self.allocator.free(duplicates)
        self.cache.lock(match.node)
        assert state.node is not None
        self.cache.unlock(state.node)
        state.node = match.node
        state.cached_pages = full

    def release(self, state: RequestState) -> None:
        """Stop holding anything for `state`: its computed full pages stay in the cache
        (unlocked, so evictable), its partial last page goes back to the pool."""
        self.commit(state)
        assert state.node is not None
        self._give_back_state_slot(state)
        self.restored(state)
        if state.snapshot_to >= 0:  # planned, and its forward never ran
            assert self.snapshots is not None
            self.snapshots.allocator.free([state.snapshot_to])
            state.snapshot_to = -1
        self.cache.unlock(state.node)
        self.allocator.free(state.page_table[state.cached_pages :])
        state.node = None
        state.page_table = []
        state.cached_pages = 0
        state.kv_len = 0

    def snapshot_cut(self, state: RequestState, ext: int) -> int:
        """`ext` cut so that a hybrid request's extend stops at the next snapshot boundary (a
        multiple of exec.mamba.mamba_snapshot_interval) rather than cross it; `ext` unchanged for a
        model without snapshots."""
        if self.snapshots is None:
            return ext
        interval = get_exec().mamba.mamba_snapshot_interval
        boundary = (state.kv_len // interval + 1) * interval
        return min(ext, boundary - state.kv_len)

    def plan_snapshot(self, state: RequestState, end: int) -> None:
        """When `state`'s forward ends at a snapshot boundary (`end` tokens computed), give it a
        snapshot slot for the state after it (`state.snapshot_to`), when one can be had."""
        if self.snapshots is None or end % get_exec().mamba.mamba_snapshot_interval:
            return
        slot = self.snapshots.slot_for_new()
        if slot is not None:
            state.snapshot_to = slot

    def keep_snapshot(self, state: RequestState) -> None:
        """After the forward that wrote `state.snapshot_to`: commit the request's pages and attach
        the snapshot to the cache node that ends where the forward ended."""
        if state.snapshot_to < 0:
            return
        assert self.snapshots is not None and state.node is not None
        self.commit(state)
        node = state.node
        assert _prefix_pages(node) * get_schedule().page_size == state.kv_len, "a snapshot off a node's end"
        self.snapshots.attach(node, state.snapshot_to)
        state.snapshot_to = -1

    def restored(self, state: RequestState) -> None:
        """`state` no longer needs the snapshot it was admitted to restore (its forward ran, or it
        left before it did)."""
        if state.restore_from >= 0:
            assert self.snapshots is not None
            self.snapshots.unpin(state.restore_from)
            state.restore_from = -1

    def flush(self) -> int:
        """Evict every cached page no running request uses; how many pages were freed."""
        freed = self.cache.evict(self.cache.evictable_pages)
        self.allocator.free(freed)
        return len(freed)

    def _give_back_state_slot(self, state: RequestState) -> None:
        if self.states is not None and state.state_slot is not None:
            self.states.free([state.state_slot])
        state.state_slot = None


def _prefix_pages(node: RadixNode) -> int:
    """Pages of the prefix that ends at `node` (its path from the root)."""
    pages = 0
    current: RadixNode | None = node
    while current is not None:
        pages += len(current.pages)
        current = current.parent
    return pages
