"""A full check of page ownership and cache locks: every page has exactly one owner.

Costs a walk of the whole pool; for tests and debugging, not for every step.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from config_bags.server import get_schedule
from runtime_scheduler.kv_memory import KvMemory, pages_for
from runtime_scheduler.radix_cache import RadixNode
from runtime_scheduler.request_state import RequestState


class PageAccountingError(RuntimeError):
    """A page is lost, has two owners, or a cache lock count disagrees with its users."""


def audit_pages(memory: KvMemory, running: Sequence[RequestState], waiting: Sequence[RequestState]) -> None:
    """Raise PageAccountingError unless every page is free, owned by one running request, or held
    by the cache, exactly once (and every recurrent-state slot free or held by one running request); each
    running request's cached pages are its cache path; lock counts equal the running requests below each
    node; every evictable leaf can be found by eviction; waiting requests hold nothing."""
    page_size = get_schedule().page_size
    owners: Counter[int] = Counter()
    cache = memory.cache
    nodes = cache.nodes()
    for page in memory.allocator.free_pages():
        owners[page] += 1
    for cached in nodes:
        owners.update(cached.pages)
        if len(cached.key) != len(cached.pages) * page_size:
            _fail(f"a cache node holds {len(cached.key)} tokens in {len(cached.pages)} pages of {page_size}")
    if len(nodes) != cache.node_count:
        _fail(f"cache counts {cache.node_count} nodes but holds {len(nodes)}")
    if cache.uncovered_leaves():
        _fail(f"{len(cache.uncovered_leaves())} unprotected cache leaves are missing from the eviction heap")
    if sum(len(n.pages) for n in nodes) != cache.cached_pages:
        _fail(f"cache counts {cache.cached_pages} pages but its nodes hold {sum(len(n.pages) for n in nodes)}")
    users: Counter[int] = Counter()
    for state in running:
        _audit_request(state)
        owners.update(state.page_table[state.cached_pages :])
        node: RadixNode | None = state.node
        assert node is not None
        if _path_pages(node) != state.page_table[: state.cached_pages]:
            _fail(f"request {state.req.rid}: its cached pages are not the pages of its cache path")
        while node is not cache.root and node is not None:
            users[id(node)] += 1
            node = node.parent
    for state in waiting:
        if state.page_table or state.node is not None or state.status != "waiting":
            _fail(f"waiting request {state.req.rid} holds pages or a cache node")
    wrong = sorted(p for p, n in owners.items() if n != 1)
    lost = sorted(set(range(memory.allocator.num_pages)) - set(owners))
    foreign = sorted(p for p in owners if not 0 <= p < memory.allocator.num_pages)
    if wrong or lost or foreign:
        _fail(
            f"pages with two owners: {wrong[:10]}, pages with none: {lost[:10]}, pages outside the pool: {foreign[:10]}"
        )
    _audit_state_slots(memory, running, waiting)
    _audit_snapshots(memory, nodes, running, waiting)
    protected = 0
    for cached in nodes:
        if cached.lock_ref != users[id(cached)]:
            _fail(f"a cache node has lock count {cached.lock_ref} but {users[id(cached)]} running requests use it")
        if cached.lock_ref > 0:
            protected += len(cached.pages)
    if protected != cache.protected_pages:
        _fail(f"cache counts {cache.protected_pages} protected pages but locked nodes hold {protected}")


def _audit_state_slots(memory: KvMemory, running: Sequence[RequestState], waiting: Sequence[RequestState]) -> None:
    """Every recurrent-state slot is free or held by one running request, and each running request
    holds one (none without a state pool); waiting requests hold none."""
    held = [s.state_slot for s in running]
    if any(s.state_slot is not None for s in waiting):
        _fail("a waiting request holds a recurrent-state slot")
    if memory.states is None:
        if any(slot is not None for slot in held):
            _fail("a running request holds a recurrent-state slot but the model keeps no state")
        return
    if any(slot is None for slot in held):
        _fail("a running request of a hybrid model holds no recurrent-state slot")
    owners = Counter([slot for slot in held if slot is not None] + memory.states.free_pages())
    wrong = sorted(slot for slot, n in owners.items() if n != 1)
    lost = sorted(set(range(memory.states.num_pages)) - set(owners))
    if wrong or lost or len(owners) != memory.states.num_pages:
        _fail(f"recurrent-state slots with two owners: {wrong[:10]}, with none: {lost[:10]}")


def _audit_snapshots(
    memory: KvMemory, nodes: Sequence[RadixNode], running: Sequence[RequestState], waiting: Sequence[RequestState]
) -> None:
    """Every snapshot slot is free, attached to one cache node (the pool's map agreeing), or about to
    be written by one running request; a slot a request is about to restore is attached, and pinned
    once per such request; waiting requests name none."""
    snapshots = memory.snapshots
    if any(s.restore_from >= 0 or s.snapshot_to >= 0 for s in waiting):
        _fail("a waiting request names a snapshot slot")
    if snapshots is None:
        if any(n.snapshot >= 0 for n in nodes) or any(s.restore_from >= 0 or s.snapshot_to >= 0 for s in running):
            _fail("a snapshot slot is named but the model keeps no snapshots")
        return
    attached = {n.snapshot: n for n in nodes if n.snapshot >= 0}
    if {slot: id(n) for slot, n in attached.items()} != {slot: id(n) for slot, n in snapshots.nodes.items()}:
        _fail("the snapshot pool's map of slots to cache nodes disagrees with the nodes")
    pending = [s.snapshot_to for s in running if s.snapshot_to >= 0]
    owners = Counter([*attached, *pending, *snapshots.allocator.free_pages()])
    wrong = sorted(slot for slot, n in owners.items() if n != 1)
    lost = sorted(set(range(snapshots.allocator.num_pages)) - set(owners))
    if wrong or lost:
        _fail(f"snapshot slots with two owners: {wrong[:10]}, with none: {lost[:10]}")
    pins = Counter(s.restore_from for s in running if s.restore_from >= 0)
    if pins != Counter(snapshots.pinned) or any(slot not in attached for slot in pins):
        _fail(f"snapshots about to be restored {dict(pins)} disagree with the pins {snapshots.pinned}")


def _audit_request(state: RequestState) -> None:
    rid = state.req.rid
    page_size = get_schedule().page_size
    if state.status != "running":
        _fail(f"request {rid} is in the running list with status {state.status}")
    if len(state.page_table) != pages_for(state.kv_len):
        _fail(f"request {rid} holds {len(state.page_table)} pages for {state.kv_len} tokens")
    if state.cached_pages * page_size > state.kv_len:
        _fail(f"request {rid} has {state.cached_pages} cached pages but only {state.kv_len} computed tokens")


def _path_pages(node: RadixNode) -> list[int]:
    chain: list[list[int]] = []
    current: RadixNode | None = node
    while current is not None:
        chain.append(current.pages)
        current = current.parent
    return [p for pages in reversed(chain) for p in pages]


def _fail(message: str) -> None:
    raise PageAccountingError(message)
