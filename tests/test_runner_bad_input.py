"""A batch the runner cannot serve is refused with a message naming what was wrong, before any KV
slot is written: the pool is bit-for-bit what it was."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from config_bags.server import MemoryBag, ScheduleBag
from runtime_runner.batch import ForwardMode
from runtime_runner.errors import BatchError
from runtime_runner.runner import ModelRunner
from runtime_runner.standalone import Batch, Request, Sampling, StandaloneDriver

POOL_SLOTS = 64


@pytest.fixture
def driver(tiny_checkpoint: Callable[..., Path], standalone_runner: Callable[..., ModelRunner]) -> StandaloneDriver:
    """A runner over a 64-slot pool (page size 4) with one prompt already prefilled into it."""
    runner = standalone_runner(
        tiny_checkpoint("LlamaForCausalLM"),
        context_length=100,
        schedule=ScheduleBag(page_size=4),
        memory=MemoryBag(max_total_tokens=POOL_SLOTS),
    )
    drv = StandaloneDriver(runner)
    drv.add(list(range(1, 12)))
    drv.step()
    return drv


def _snapshot(drv: StandaloneDriver) -> list[torch.Tensor]:
    pool = drv.runner.pool
    return [t.clone() for t in (*pool.k, *pool.v)]


def _request(prefix: int, extend: int, pages: tuple[int, ...]) -> Request:
    return Request("bad", prefix, extend, pages, True, Sampling(), tuple(range(prefix + extend)), ())


def _extend(
    tokens: int,
    pages: tuple[int, ...],
    *,
    positions: tuple[int, ...] | None = None,
    locs: tuple[int, ...] | None = None,
    mode: ForwardMode = "extend",
) -> Batch:
    pos = positions if positions is not None else tuple(range(tokens))
    loc = locs if locs is not None else tuple(pages[p // 4] * 4 + p % 4 for p in pos)
    return Batch(mode, tuple(range(tokens)), pos, loc, (_request(0, tokens, pages),))


CASES: dict[str, tuple[Callable[[], Batch], str]] = {
    "more slots than the pool holds": (
        lambda: _extend(80, tuple(range(20))),
        r"page table names pages 0\.\.19; accepted: 0\.\.15",
    ),
    "slot past the pool": (lambda: _extend(2, (15,), locs=(60, 64)), r"KV slots 60\.\.64; accepted: 0\.\.63"),
    "page table too short": (
        lambda: _extend(9, (14, 15), locs=tuple(56 + i for i in range(9))),
        "holds 9 tokens but its page table has 2 pages of 4",
    ),
    "positions out of order": (
        lambda: _extend(3, (15,), positions=(0, 2, 1)),
        "positions must run prefix_len, prefix_len\\+1",
    ),
    "slot off the page table": (lambda: _extend(2, (15,), locs=(60, 62)), "out_cache_loc must be the page-table slot"),
    "lengths disagree": (
        lambda: Batch("extend", (1, 2, 3), (0, 1), (60, 61), (_request(0, 2, (15,)),)),
        r"lengths \(3, 2, 2\); all must equal sum\(extend_len\) = 2",
    ),
    "decode of two tokens": (lambda: _extend(2, (15,), mode="decode"), "a decode batch computes one token per request"),
    "longer than the context": (
        lambda: _extend(101, tuple(range(26))),
        "reaches 101 tokens; accepted: at most the context length 100",
    ),
    "no requests": (lambda: Batch("extend", (), (), (), ()), "batch has no requests"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_refused_with_the_pool_unchanged(driver: StandaloneDriver, case: str) -> None:
    """Reverse-verified: removing the page-range check or the slot-range check in the runner fails
    the "more slots than the pool holds" and "slot past the pool" cases."""
    build, message = CASES[case]
    before = _snapshot(driver)
    with pytest.raises(BatchError, match=message):
        driver.runner.forward(build())
    after = _snapshot(driver)
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))
