"""The KV pool is sized from the published bags and reads the page size at the moment of use."""

from __future__ import annotations

import pytest
import torch

from config_bags import overriding, publish
from config_bags.server import Bags, MemoryBag, ScheduleBag
from runtime_runner.errors import BatchError
from runtime_runner.kv_pool import KVPool, kv_bytes_per_token


def _fitting(pool: int, page_size: int = 1) -> ScheduleBag:
    """Schedule leaves whose prefill budgets fit a pool of `pool` tokens."""
    return ScheduleBag(page_size=page_size, chunked_prefill_size=pool, max_prefill_tokens=pool)


def _pool() -> KVPool:
    return KVPool(num_layers=3, num_kv_heads=2, head_dim=8, dtype=torch.bfloat16, device=torch.device("cpu"))


def test_sized_from_max_total_tokens_in_whole_pages() -> None:
    publish(Bags(memory=MemoryBag(max_total_tokens=100), schedule=_fitting(100, page_size=16)), role="standalone")
    pool = _pool()
    assert (pool.num_slots, pool.num_pages) == (96, 6)
    assert len(pool.k) == len(pool.v) == 3 and pool.k[0].shape == (2, 96, 8) and pool.dtype == torch.bfloat16


def test_sized_from_memory_budget_when_tokens_unset() -> None:
    publish(Bags(memory=MemoryBag(kv_cache_memory_mb=1)), role="standalone")
    per_token = kv_bytes_per_token(3, 2, 8, torch.bfloat16)
    assert per_token == 3 * 2 * 2 * 8 * 2
    assert _pool().num_slots == 1024 * 1024 // per_token


def test_page_count_follows_an_override_of_page_size() -> None:
    """Reverse-verified: caching page_size in the pool at construction makes num_pages stay 12."""
    publish(Bags(memory=MemoryBag(max_total_tokens=48), schedule=_fitting(48, page_size=4)), role="standalone")
    pool = _pool()
    assert pool.num_pages == 12
    with overriding("test", page_size=8):
        assert pool.num_pages == 6


def test_fewer_slots_than_a_page_is_refused() -> None:
    """A pool sized from its memory budget (max_total_tokens unset, so no rule sees the pool) that
    holds less than one page is refused when built."""
    publish(Bags(memory=MemoryBag(kv_cache_memory_mb=1), schedule=ScheduleBag(page_size=8192)), role="standalone")
    with pytest.raises(BatchError, match="5461 token slots, less than one page of 8192"):
        _pool()


def test_out_of_range_slots_are_refused_before_any_write() -> None:
    publish(Bags(memory=MemoryBag(max_total_tokens=32), schedule=_fitting(32)), role="standalone")
    pool = _pool()
    with pytest.raises(BatchError, match=r"slots 3\.\.32; accepted: 0\.\.31"):
        pool.check_slots([3, 32])
    with pytest.raises(BatchError, match="writes 33 tokens but the KV pool holds only 32"):
        pool.check_slots([i % 32 for i in range(33)])
    with pytest.raises(BatchError, match=r"-1\.\.5"):
        pool.check_slots([5, -1])
    pool.check_slots([0, 31])


def test_write_stores_at_the_given_slots() -> None:
    publish(Bags(memory=MemoryBag(max_total_tokens=16), schedule=_fitting(16)), role="standalone")
    pool = _pool()
    k, v = torch.ones(2, 2, 8), torch.full((2, 2, 8), 2.0)
    pool.write(1, torch.tensor([3, 7]), k, v)
    assert (
        pool.k[1][:, 3].eq(1).all()
        and pool.v[1][:, 7].eq(2).all()
        and pool.k[1][:, 4].eq(0).all()
        and pool.k[0].eq(0).all()
    )
