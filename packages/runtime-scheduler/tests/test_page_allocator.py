"""The page allocator hands out each page once and refuses what it does not have."""

import pytest

from runtime_scheduler.page_allocator import PageAllocator


def test_alloc_and_free_round_trip() -> None:
    pool = PageAllocator(8)
    first = pool.alloc(3)
    second = pool.alloc(5)
    assert sorted(first + second) == list(range(8))
    assert pool.free_count == 0
    pool.free(first)
    assert pool.free_count == 3
    assert sorted(pool.alloc(3)) == sorted(first)


def test_over_allocation_raises_and_changes_nothing() -> None:
    pool = PageAllocator(4)
    pool.alloc(3)
    with pytest.raises(MemoryError, match="asked for 2 KV pages but only 1 are free"):
        pool.alloc(2)
    assert pool.free_count == 1


def test_empty_pool_is_refused() -> None:
    with pytest.raises(ValueError, match="a pool of KV pages needs at least one, got 0; accepted: an int >= 1"):
        PageAllocator(0)
