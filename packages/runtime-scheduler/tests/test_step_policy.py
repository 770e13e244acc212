"""What one step decides: chunk sizes, mixed batches, the running cap, admission order, and
retraction under memory pressure. Leaves are read from the published bags at each step."""

from scheduler_fakes import Transcript, build, record, reference_output, run_to_completion

from config_bags import override, unpublish
from runtime_scheduler import Request, StopConditions

LONG = StopConditions(max_new_tokens=50, ignore_eos=True)


def test_long_prompts_are_chunked_to_whole_pages() -> None:
    """chunked_prefill_size 10 with page_size 4 gives chunks of 8 (config_bags.server.chunk_size()).

    Reverse-verified: using schedule.chunked_prefill_size instead of chunk_size_of() in
    _plan_extends fails this test (chunks of 10)."""
    scheduler, executor = build(slots=64, page_size=4, chunked_prefill_size=10)
    executor.keep_batches = True
    prompt = tuple(range(1, 31))
    scheduler.add_request(Request(rid="r", prompt_ids=prompt, stop=StopConditions(max_new_tokens=2, ignore_eos=True)))
    t = run_to_completion(scheduler)
    shapes = [(b.forward_mode, r.prefix_len, r.extend_len, r.sample) for b in executor.batches for r in b.requests]
    assert shapes == [
        ("extend", 0, 8, False),
        ("extend", 8, 8, False),
        ("extend", 16, 8, False),
        ("extend", 24, 6, True),
        ("decode", 30, 1, True),
    ]
    assert t.tokens["r"] == reference_output(prompt, StopConditions(max_new_tokens=2, ignore_eos=True), 256)


def test_chunk_size_override_applies_to_the_next_chunk() -> None:
    scheduler, executor = build(slots=64, page_size=2, chunked_prefill_size=4)
    executor.keep_batches = True
    scheduler.add_request(Request(rid="r", prompt_ids=tuple(range(1, 20)), stop=StopConditions(max_new_tokens=1)))
    scheduler.step()
    override("admin", chunked_prefill_size=8)
    scheduler.step()
    assert [b.requests[0].extend_len for b in executor.batches] == [4, 8]


def test_decodes_and_a_new_prompt_share_one_mixed_batch() -> None:
    scheduler, executor = build()
    executor.keep_batches = True
    scheduler.add_request(Request(rid="old", prompt_ids=(1, 2, 3), stop=LONG))
    scheduler.step()
    scheduler.add_request(Request(rid="new", prompt_ids=(4, 5, 6, 7), stop=LONG))
    scheduler.step()
    batch = executor.batches[-1]
    assert batch.forward_mode == "mixed"
    assert [(r.rid, r.extend_len) for r in batch.requests] == [("new", 4), ("old", 1)]
    assert list(batch.input_ids[:4]) == [4, 5, 6, 7]


def test_running_cap_override_takes_effect_on_the_next_step() -> None:
    """Reverse-verified: removing the max_running_requests check in _plan_extends fails this test."""
    scheduler, _ = build(slots=256, max_running_requests=8)
    for i in range(8):
        scheduler.add_request(Request(rid=f"r{i}", prompt_ids=(i + 1, 2), stop=LONG))
    override("admin", max_running_requests=4)
    scheduler.step()
    assert (scheduler.metrics().num_running, scheduler.metrics().num_waiting) == (4, 4)
    override("admin", max_running_requests=6)
    scheduler.step()
    assert (scheduler.metrics().num_running, scheduler.metrics().num_waiting) == (6, 2)


def test_prefill_budget_limits_what_one_step_admits() -> None:
    scheduler, executor = build(slots=256, max_prefill_tokens=8, chunked_prefill_size=-1)
    executor.keep_batches = True
    for i in range(3):
        scheduler.add_request(Request(rid=f"r{i}", prompt_ids=(i + 1,) * 5, stop=LONG))
    scheduler.step()
    assert [r.rid for r in executor.batches[0].requests] == ["r0"]


def test_lpm_admits_the_longest_cached_prefix_first_and_fcfs_keeps_arrival_order() -> None:
    shared = tuple(range(1, 9))
    for policy, first in (("fcfs", "cold"), ("lpm", "warm")):
        scheduler, executor = build(slots=128, max_running_requests=1, schedule_policy=policy)
        scheduler.add_request(Request(rid="seed", prompt_ids=shared + (1,), stop=StopConditions(max_new_tokens=1)))
        run_to_completion(scheduler)
        executor.keep_batches = True
        scheduler.add_request(Request(rid="cold", prompt_ids=(20, 21, 22), stop=StopConditions(max_new_tokens=1)))
        scheduler.add_request(Request(rid="warm", prompt_ids=shared + (2,), stop=StopConditions(max_new_tokens=1)))
        scheduler.step()
        assert executor.batches[0].requests[0].rid == first, policy
        unpublish()


def test_decode_out_of_pages_retracts_the_newest_and_loses_nothing() -> None:
    """Reverse-verified: with the retraction loop in _plan_decodes replaced by a plain
    allocation, this test fails with MemoryError."""
    scheduler, _ = build(slots=40, page_size=2, max_running_requests=8)
    prompts = {f"r{i}": (i + 1, i + 2, i + 3, i + 4, i + 5) for i in range(5)}
    stop = StopConditions(max_new_tokens=12, ignore_eos=True)
    for rid, prompt in prompts.items():
        scheduler.add_request(Request(rid=rid, prompt_ids=prompt, stop=stop))
    t = run_to_completion(scheduler)
    assert scheduler.metrics().num_retractions > 0
    for rid, prompt in prompts.items():
        assert t.tokens[rid] == reference_output(prompt, stop, 256), rid
        assert t.reasons[rid] == "length"
    scheduler.flush_cache()
    assert scheduler.metrics().free_pages == scheduler.metrics().total_pages


def test_retracted_request_keeps_its_prefix_in_the_cache() -> None:
    scheduler, _ = build(slots=24, page_size=4, max_running_requests=8)
    stop = StopConditions(max_new_tokens=8, ignore_eos=True)
    scheduler.add_request(Request(rid="old", prompt_ids=tuple(range(1, 8)), stop=stop))
    scheduler.add_request(Request(rid="new", prompt_ids=tuple(range(20, 28)), stop=stop))
    t = Transcript(tokens={}, reasons={}, cached={}, steps=0)
    while scheduler.metrics().num_retractions == 0:
        record(t, scheduler.step())
        scheduler.audit()
    assert scheduler.metrics().num_waiting == 1
    assert scheduler.metrics().cached_pages >= 2  # the retracted request's computed pages
    while scheduler.has_work():
        record(t, scheduler.step())
        scheduler.audit()
    assert t.tokens["new"] == reference_output(tuple(range(20, 28)), stop, 256)


def test_a_request_alone_in_a_full_pool_finishes_with_length() -> None:
    scheduler, _ = build(slots=8, page_size=1)
    prompt = (1, 2, 3, 4, 5, 6)
    scheduler.add_request(Request(rid="r", prompt_ids=prompt, stop=StopConditions(max_new_tokens=100, ignore_eos=True)))
    t = run_to_completion(scheduler)
    # KV for positions 0..7 fits; the token at position 8 is sampled, and then nothing more fits.
    assert t.tokens["r"] == reference_output(prompt, StopConditions(max_new_tokens=3, ignore_eos=True), 256)
    assert t.reasons["r"] == "length"
    scheduler.flush_cache()
    assert scheduler.metrics().free_pages == 8


def test_step_with_nothing_to_do_returns_at_once() -> None:
    scheduler, executor = build()
    executor.keep_batches = True
    assert scheduler.step() == []
    assert not scheduler.has_work()
    assert executor.batches == []
