"""A hybrid model's recurrent-state snapshots in the prefix cache: which snapshot slot holds the
state after which cached prefix.

A linear-attention layer's state after a prefix cannot be rebuilt from the prefix's KV pages, so a
request may resume after a cached prefix only where a snapshot of that state was kept. Snapshots
are taken while requests prefill, at every `exec.mamba.mamba_snapshot_interval` tokens (extends stop
at those boundaries), and each is attached to the radix node that ends exactly there. A new
request resumes at the deepest node of its match that holds one (the runner copies the snapshot
into the request's state slot), and computes the rest of its prompt from there.

Snapshots live in the runner's own snapshot pool (a budget apart from the KV pages); when a new one
needs a slot and none is free, the least recently used snapshot goes first (leaves before the
inner nodes they hang from), except one a request is about to restore. A node whose snapshot was
dropped keeps its KV pages, but no request resumes there any more; a node evicted from the cache
gives its snapshot slot back.
"""

from __future__ import annotations

from runtime_scheduler.page_allocator import PageAllocator
from runtime_scheduler.radix_cache import RadixNode


class StateSnapshots:
    """Bookkeeping of `slots` snapshot slots: free, attached to one radix node, pending (a forward
    will write it), or pinned (attached, and a request restores it in its next forward)."""

    def __init__(self, slots: int) -> None:
        self.allocator = PageAllocator(slots, "recurrent-state snapshots")
        self.nodes: dict[int, RadixNode] = {}  # slot -> the node whose prefix it holds the state after
        self.pinned: dict[int, int] = {}  # slot -> requests about to restore it
        self.taken = 0  # snapshots attached (total)
        self.dropped = 0  # snapshots dropped to make room for newer ones (total)

    def slot_for_new(self) -> int | None:
        """A slot for a snapshot about to be taken: a free one, else the least recently used
        unpinned one's (dropping it from its node); None when every slot is pinned."""
        if self.allocator.free_count:
            return self.allocator.alloc(1)[0]
        candidates = [(n.last_access, bool(n.children), s) for s, n in self.nodes.items() if s not in self.pinned]
        if not candidates:
            return None
        _, _, slot = min(candidates)
        self.detach(self.nodes[slot])
        self.dropped += 1
        return self.allocator.alloc(1)[0]

    def attach(self, node: RadixNode, slot: int) -> None:
        """`slot` now holds the state after `node`'s prefix; when the node already has a snapshot
        (another request kept the same prefix's state), `slot` goes back to the pool."""
        if node.snapshot >= 0:
            self.allocator.free([slot])
            return
        node.snapshot = slot
        self.nodes[slot] = node
        self.taken += 1

    def detach(self, node: RadixNode) -> None:
        """Drop `node`'s snapshot (the node was evicted, or its slot is reused); its slot is free."""
        slot = node.snapshot
        if slot < 0:
            return
        assert slot not in self.pinned, "a snapshot a request is about to restore was dropped"
        node.snapshot = -1
        del self.nodes[slot]
        self.allocator.free([slot])

    def pin(self, slot: int) -> None:
        """A request restores `slot` in its next forward: keep it until `unpin`."""
        self.pinned[slot] = self.pinned.get(slot, 0) + 1

    def unpin(self, slot: int) -> None:
        """Undo one `pin(slot)`."""
        left = self.pinned[slot] - 1
        if left:
            self.pinned[slot] = left
        else:
            del self.pinned[slot]

    def resume_node(self, node: RadixNode) -> RadixNode | None:
        """The deepest node from `node` up to the root's child that holds a snapshot (None: none does)."""
        current: RadixNode | None = node
        while current is not None and current.parent is not None:
            if current.snapshot >= 0:
                return current
            current = current.parent
        return None
