"""The radix cache at page granularity: match, split, insert with duplicates, locks, LRU eviction."""

import pytest

from config_bags import publish
from config_bags.server import Bags, ScheduleBag
from runtime_scheduler.radix_cache import RadixCache


@pytest.fixture(autouse=True)
def _pages_of_two() -> None:
    """The cache reads its page size from the published bags (conftest unpublishes after): two tokens a page."""
    publish(Bags(schedule=ScheduleBag(page_size=2)), role="standalone")


def test_match_is_whole_pages_only() -> None:
    cache = RadixCache()
    cache.insert((1, 2, 3, 4, 5, 6), [10, 11, 12])
    assert cache.match_prefix((1, 2, 3, 4, 5)).pages == [10, 11]
    assert cache.match_prefix((1, 2, 3, 9)).pages == [10]
    assert cache.match_prefix((1, 9)).pages == []
    assert cache.match_prefix((1,)).pages == []


def test_match_inside_an_edge_splits_it_and_keeps_every_page() -> None:
    cache = RadixCache()
    cache.insert((1, 2, 3, 4, 5, 6), [10, 11, 12])
    match = cache.match_prefix((1, 2, 3, 4, 7, 7))
    assert match.pages == [10, 11]
    assert match.node.key == (1, 2, 3, 4)
    assert sorted(p for n in cache.nodes() for p in n.pages) == [10, 11, 12]
    assert cache.cached_pages == 3
    assert cache.cached_prefix_len((1, 2, 3, 4, 5, 6)) == 6


def test_insert_keeps_the_cached_pages_and_reports_them_for_duplicates() -> None:
    cache = RadixCache()
    cache.insert((1, 2, 3, 4), [10, 11])
    result = cache.insert((1, 2, 3, 4, 5, 6), [20, 21, 22])
    # The first two pages were cached already: the caller frees 20, 21 and uses 10, 11.
    assert result.pages == [10, 11, 22]
    assert cache.cached_pages == 3


def test_cached_prefix_len_does_not_change_the_tree() -> None:
    cache = RadixCache()
    cache.insert((1, 2, 3, 4), [10, 11])
    assert cache.cached_prefix_len((1, 2, 9, 9)) == 2
    assert len(cache.nodes()) == 1


def test_eviction_takes_least_recently_used_leaves_first() -> None:
    cache = RadixCache()
    cache.insert((1, 1), [1])
    cache.insert((2, 2), [2])
    cache.insert((3, 3), [3])
    cache.match_prefix((1, 1, 0))  # touch (1, 1): now (2, 2) is the oldest
    assert cache.evict(1) == [2]
    assert cache.evict(1) == [3]
    assert cache.evict(5) == [1]
    assert cache.cached_pages == 0


def test_locked_nodes_and_their_ancestors_are_never_evicted() -> None:
    cache = RadixCache()
    cache.insert((1, 1, 2, 2), [1, 2])
    leaf = cache.insert((1, 1, 2, 2, 3, 3), [1, 2, 3]).node
    cache.insert((4, 4), [4])
    cache.lock(leaf)
    assert cache.protected_pages == 3
    assert cache.evictable_pages == 1
    assert cache.evict(10) == [4]
    cache.unlock(leaf)
    assert cache.evictable_pages == 3
    assert sorted(cache.evict(10)) == [1, 2, 3]


def test_evicting_a_leaf_exposes_its_parent() -> None:
    cache = RadixCache()
    cache.insert((1, 1, 2, 2), [1, 2])
    cache.insert((1, 1, 3, 3), [1, 3])  # splits (1, 1) off as a parent of two leaves
    assert sorted(cache.evict(3)) == [1, 2, 3]
