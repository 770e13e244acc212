"""A hybrid model's recurrent-state slots: each running request holds its own, admission waits for
a free one, retraction, abort and finish give it back, and the audit covers them. The executor is
state-faithful (scheduler_fakes.StateFaithfulExecutor): it fails a forward whose state slot does
not hold exactly the request's computed prefix, so these outputs equal the reference only when the
slots are handed out and returned right."""

from __future__ import annotations

import pytest
from scheduler_fakes import StateFaithfulExecutor, Transcript, build, record, reference_output, run_to_completion

import config_bags
from config_bags import publish
from config_bags.server import Bags, ModelBag, ScheduleBag
from runtime_scheduler import PageAccountingError, Request, Scheduler, StopConditions

PROMPTS = {rid: tuple(range(1, 14)) + tuple(range(20 + i, 25 + i)) for i, rid in enumerate("abcdef")}


def build_hybrid(*, slots: int, state_slots: int, **schedule: object) -> tuple[Scheduler, StateFaithfulExecutor]:
    bags = Bags(schedule=ScheduleBag(**schedule), model=ModelBag())  # type: ignore[arg-type]
    config_bags.unpublish()
    publish(bags, role="standalone")
    executor = StateFaithfulExecutor(slots, bags.schedule.page_size, state_slots)
    return Scheduler(executor, model_max_length=256, max_total_tokens=slots, state_slots=state_slots), executor


@pytest.mark.parametrize("page_size", [1, 4])
def test_admission_waits_for_a_free_state_slot(page_size: int) -> None:
    """Reverse-verified: without `can_admit` in the admission loop, a third request was admitted
    with no slot and `attach_prefix` raised MemoryError."""
    scheduler, executor = build_hybrid(slots=400, state_slots=2, page_size=page_size, max_prefill_tokens=64)
    stop = StopConditions(max_new_tokens=12, ignore_eos=True)
    for rid in "abcde":
        scheduler.add_request(Request(rid=rid, prompt_ids=PROMPTS[rid], stop=stop))
    executor.keep_batches = True
    t = run_to_completion(scheduler)
    assert max(len(b.requests) for b in executor.batches) == 2
    assert all(t.tokens[rid] == reference_output(PROMPTS[rid], stop, 256) for rid in "abcde")
    assert all(t.cached[rid] == 0 for rid in "abcde")  # a hybrid model reuses no cached prefix


def test_retraction_and_abort_give_the_slot_back_and_the_request_starts_afresh() -> None:
    """48 KV slots cannot hold three 40-token requests: the newest is retracted, re-admitted later
    with a fresh state (prefix_len 0), and an abort mid-decode frees its slot for the next.
    Reverse-verified: with `KvMemory.release` keeping the slot, the slots ran out and the audit
    failed; with cached prefixes reused, the executor found a state slot that did not hold the
    request's prefix."""
    scheduler, executor = build_hybrid(slots=48, state_slots=3, page_size=4, max_prefill_tokens=64)
    stop = StopConditions(max_new_tokens=22, ignore_eos=True)
    for rid in "abc":
        scheduler.add_request(Request(rid=rid, prompt_ids=PROMPTS[rid], stop=stop))
    t = Transcript(tokens={}, reasons={}, cached={}, steps=0)
    for _ in range(3):
        record(t, scheduler.step())
        scheduler.audit()
    assert scheduler.abort("a")
    scheduler.add_request(Request(rid="d", prompt_ids=PROMPTS["d"], stop=stop))
    while scheduler.has_work():
        record(t, scheduler.step())
        scheduler.audit()
    assert scheduler.metrics().num_retractions > 0
    assert all(t.tokens[rid] == reference_output(PROMPTS[rid], stop, 256) for rid in "bcd")


def test_the_audit_finds_a_slot_held_twice_or_lost() -> None:
    scheduler, _ = build_hybrid(slots=200, state_slots=2, page_size=1)
    stop = StopConditions(max_new_tokens=8, ignore_eos=True)
    scheduler.add_request(Request(rid="a", prompt_ids=PROMPTS["a"], stop=stop))
    scheduler.step()
    scheduler.audit()
    running = scheduler._running[0]  # noqa: SLF001 - breaking the books on purpose
    memory = scheduler._memory  # noqa: SLF001
    assert memory.states is not None
    memory.states.free([running.state_slot])  # the slot is now free and held
    with pytest.raises(PageAccountingError, match="two owners"):
        scheduler.audit()
    memory.states.alloc(2)  # and now lost
    with pytest.raises(PageAccountingError, match="with none"):
        scheduler.audit()


def test_a_model_without_state_slots_hands_out_none_and_reuses_its_cache() -> None:
    """Reverse-verified: with `_entry` handing out slot 0 for a request without one, the first
    assert failed."""
    scheduler, executor = build(slots=200, page_size=4)
    stop = StopConditions(max_new_tokens=4, ignore_eos=True)
    executor.keep_batches = True
    for rid in "ab":
        scheduler.add_request(Request(rid=rid, prompt_ids=PROMPTS[rid], stop=stop))
        t = run_to_completion(scheduler)
    assert all(r.state_slot == -1 for b in executor.batches for r in b.requests)
    assert t.cached["b"] == 12  # the shared 13-token prefix, in whole pages of 4
    with pytest.raises(ValueError, match="state_slots=-1"):
        Scheduler(executor, model_max_length=64, max_total_tokens=64, state_slots=-1)
