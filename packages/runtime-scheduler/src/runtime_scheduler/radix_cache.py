"""A radix tree of cached token prefixes at page granularity.

Each edge holds a whole number of pages: its token ids (a tuple) and the KV pages that hold them.
A node is protected while a running request uses it (its lock count, which also counts every
lock of a descendant); unprotected leaves are evicted least recently used first. The page size
is read from the published bags at each use (it is cold: kv_memory.py refuses a change under a
built pool).

Eviction candidates live in a lazy heap: an entry is pushed whenever a node becomes (or, being
one, is touched as) an unprotected leaf, and entries that no longer describe their node are
skipped when popped, so eviction never walks the whole tree.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import NamedTuple

from config_bags.server import get_schedule


class RadixNode:
    """One edge of the tree: `key` (tokens, a multiple of the page size) stored in `pages`."""

    __slots__ = ("children", "key", "last_access", "lock_ref", "pages", "parent", "snapshot")

    def __init__(self, parent: RadixNode | None, key: tuple[int, ...], pages: list[int], last_access: int) -> None:
        self.parent = parent
        self.key = key
        self.pages = pages
        self.children: dict[tuple[int, ...], RadixNode] = {}
        self.lock_ref = 0
        self.last_access = last_access
        self.snapshot = -1  # a hybrid's snapshot slot holding the state after this node's prefix (-1: none)


class PrefixMatch(NamedTuple):
    """The cached pages of a token prefix, and the deepest node that holds them (lock it to keep them)."""

    pages: list[int]
    node: RadixNode


class RadixCache:
    """Prefix cache over page indices: match, insert, lock, unlock, evict."""

    def __init__(self, on_evict: Callable[[RadixNode], None] | None = None) -> None:
        """`on_evict` is told of every node eviction drops (a hybrid's snapshots go with their node)."""
        self._on_evict = on_evict
        self.root = RadixNode(None, (), [], 0)
        self.root.lock_ref = 1  # the root is never evicted
        self._clock = 0
        self.cached_pages = 0
        self.protected_pages = 0
        self.node_count = 0
        self._candidates: list[tuple[int, int, RadixNode]] = []  # (last_access, tiebreak, node)
        self._pushes = 0

    @property
    def evictable_pages(self) -> int:
        """Pages that eviction could free now: every page of a node no running request uses."""
        return self.cached_pages - self.protected_pages

    def match_prefix(self, tokens: Sequence[int]) -> PrefixMatch:
        """The longest cached prefix of `tokens` in whole pages. Splits a node where the match ends
        inside it, so that the returned node holds exactly the matched prefix."""
        page_size = get_schedule().page_size
        key = tuple(tokens[: len(tokens) // page_size * page_size])
        self._clock += 1
        node, pages, start = self.root, [], 0
        while start < len(key):
            child = node.children.get(key[start : start + page_size])
            if child is None:
                break
            self._touch(child)
            matched = _common_len(child.key, key, start)
            if matched < len(child.key):
                node = self._split(child, matched)
                pages.extend(node.pages)
                break
            pages.extend(child.pages)
            node = child
            start += matched
        return PrefixMatch(pages, node)

    def cached_prefix_len(self, tokens: Sequence[int]) -> int:
        """How many leading tokens of `tokens` are cached, without changing the tree."""
        page_size = get_schedule().page_size
        key = tuple(tokens[: len(tokens) // page_size * page_size])
        node, start = self.root, 0
        while start < len(key):
            child = node.children.get(key[start : start + page_size])
            if child is None:
                break
            matched = _common_len(child.key, key, start)
            start += matched
            if matched < len(child.key):
                break
            node = child
        return start

    def insert(self, tokens: Sequence[int], pages: Sequence[int]) -> PrefixMatch:
        """Cache `pages` as holding `tokens[: len(pages) * page_size]`.

        Where the tree already holds some of these tokens it keeps its own pages; the returned
        match lists the tree's page for every page of the key, so the caller frees each of its
        pages that differs (a duplicate) and adopts the tree's. Pages the tree did not have
        become the tree's.
        """
        page_size = get_schedule().page_size
        key = tuple(tokens[: len(pages) * page_size])
        self._clock += 1
        node, tree_pages, start = self.root, [], 0
        while start < len(key):
            child = node.children.get(key[start : start + page_size])
            if child is None:
                leaf = RadixNode(node, key[start:], list(pages[start // page_size :]), self._clock)
                node.children[key[start : start + page_size]] = leaf
                self.cached_pages += len(leaf.pages)
                self.node_count += 1
                self._push(leaf)
                tree_pages.extend(leaf.pages)
                node = leaf
                break
            self._touch(child)
            matched = _common_len(child.key, key, start)
            if matched < len(child.key):
                child = self._split(child, matched)
            tree_pages.extend(child.pages)
            node = child
            start += matched
        return PrefixMatch(tree_pages, node)

    def lock(self, node: RadixNode) -> None:
        """Protect `node` and its ancestors from eviction (one more user)."""
        while node is not self.root:
            if node.lock_ref == 0:
                self.protected_pages += len(node.pages)
            node.lock_ref += 1
            parent = node.parent
            assert parent is not None
            node = parent

    def unlock(self, node: RadixNode) -> None:
        """Undo one `lock(node)`."""
        while node is not self.root:
            if node.lock_ref <= 0:
                raise RuntimeError("radix cache: unlock of a node that is not locked (a lock was lost or doubled)")
            node.lock_ref -= 1
            if node.lock_ref == 0:
                self.protected_pages -= len(node.pages)
                if not node.children:
                    self._push(node)
            parent = node.parent
            assert parent is not None
            node = parent

    def evict(self, count: int) -> list[int]:
        """Drop least recently used unprotected leaves until at least `count` pages are freed (or
        nothing more can be); returns the freed pages, which the caller gives back to the pool."""
        freed: list[int] = []
        heap = self._candidates
        while heap and len(freed) < count:
            last_access, _, leaf = heapq.heappop(heap)
            parent = leaf.parent
            if parent is None or leaf.children or leaf.lock_ref or leaf.last_access != last_access:
                continue  # stale: evicted, grown, locked or touched since it was pushed
            del parent.children[leaf.key[: len(leaf.key) // len(leaf.pages)]]
            if self._on_evict is not None:
                self._on_evict(leaf)
            leaf.parent = None
            freed.extend(leaf.pages)
            self.cached_pages -= len(leaf.pages)
            self.node_count -= 1
            if parent is not self.root and not parent.children and parent.lock_ref == 0:
                self._push(parent)
        return freed

    def nodes(self) -> list[RadixNode]:
        """Every node but the root (for audits and metrics)."""
        out: list[RadixNode] = []
        stack = list(self.root.children.values())
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(node.children.values())
        return out

    def uncovered_leaves(self) -> list[RadixNode]:
        """Unprotected leaves that eviction could not find (none, when the heap is kept right)."""
        current = {(entry[0], id(entry[2])) for entry in self._candidates}
        return [n for n in self.nodes() if not n.children and n.lock_ref == 0 and (n.last_access, id(n)) not in current]

    def _touch(self, node: RadixNode) -> None:
        node.last_access = self._clock
        if not node.children and node.lock_ref == 0:
            self._push(node)

    def _push(self, node: RadixNode) -> None:
        """Record `node` as an eviction candidate at its current last access."""
        self._pushes += 1
        heapq.heappush(self._candidates, (node.last_access, self._pushes, node))
        if len(self._candidates) > 4 * self.node_count + 1024:
            self._compact()

    def _compact(self) -> None:
        """Drop stale candidates so the heap stays proportional to the tree."""
        live = [
            entry
            for entry in self._candidates
            if entry[2].parent is not None
            and not entry[2].children
            and entry[2].lock_ref == 0
            and entry[2].last_access == entry[0]
        ]
        heapq.heapify(live)
        self._candidates = live

    def _split(self, child: RadixNode, at: int) -> RadixNode:
        """Cut `child` after `at` tokens; the new upper node takes the first part and is returned."""
        page_size = get_schedule().page_size
        parent = child.parent
        assert parent is not None
        head = RadixNode(parent, child.key[:at], child.pages[: at // page_size], child.last_access)
        head.lock_ref = child.lock_ref
        child.key = child.key[at:]
        child.pages = child.pages[at // page_size :]
        child.parent = head
        head.children[child.key[:page_size]] = child
        parent.children[head.key[:page_size]] = head
        self.node_count += 1
        return head


def _common_len(edge: tuple[int, ...], key: tuple[int, ...], start: int) -> int:
    """How many tokens of `edge` match `key` from `start`, in whole pages."""
    if key[start : start + len(edge)] == edge:
        return len(edge)
    page_size = get_schedule().page_size
    limit = min(len(edge), len(key) - start) // page_size * page_size
    matched = 0
    while matched < limit and edge[matched : matched + page_size] == key[start + matched : start + matched + page_size]:
        matched += page_size
    return matched
