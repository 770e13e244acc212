"""The page audit is not vacuous: each kind of corruption it guards against makes it raise."""

import pytest
from scheduler_fakes import build

from runtime_scheduler import PageAccountingError, Request, Scheduler, StopConditions

STOP = StopConditions(max_new_tokens=30, ignore_eos=True)


def _busy() -> Scheduler:
    scheduler, _ = build(slots=32, page_size=2)
    scheduler.add_request(Request(rid="a", prompt_ids=(1, 2, 3, 4, 5, 6, 7), stop=STOP))
    scheduler.add_request(Request(rid="b", prompt_ids=(1, 2, 3, 4, 9), stop=STOP))
    for _ in range(3):
        scheduler.step()
    scheduler.add_request(Request(rid="c", prompt_ids=(8, 8, 8), stop=STOP))
    scheduler.audit()
    return scheduler


def test_a_page_both_free_and_held_is_caught() -> None:
    scheduler = _busy()
    held = scheduler._running[0].page_table[-1]
    scheduler._memory.allocator.free([held])
    with pytest.raises(PageAccountingError, match=rf"pages with two owners: \[{held}\]"):
        scheduler.audit()


def test_a_lost_page_is_caught() -> None:
    scheduler = _busy()
    lost = scheduler._memory.allocator.alloc(1)[0]
    with pytest.raises(PageAccountingError, match=rf"pages with none: \[{lost}\]"):
        scheduler.audit()


def test_a_lock_without_a_user_is_caught() -> None:
    scheduler = _busy()
    node = scheduler._running[0].node
    assert node is not None
    scheduler._memory.cache.lock(node)
    with pytest.raises(PageAccountingError, match=r"lock count (\d+) but (?!\1)\d+ running requests use it"):
        scheduler.audit()


def test_a_waiting_request_holding_pages_is_caught() -> None:
    scheduler = _busy()
    scheduler._waiting[0].page_table = scheduler._memory.allocator.alloc(1)
    with pytest.raises(PageAccountingError, match="waiting request c holds pages"):
        scheduler.audit()
