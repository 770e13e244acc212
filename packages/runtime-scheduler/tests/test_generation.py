"""End-to-end generation through the scheduler with a KV-faithful executor: outputs equal the
reference model's greedy outputs whatever the chunking, prefix sharing and page size."""

import pytest
from scheduler_fakes import build, reference_output, run_to_completion

from runtime_scheduler import Request, SamplingParams, StopConditions

SYSTEM = tuple(range(1, 14))
PROMPTS = {
    "a": SYSTEM + (3, 1, 4, 1, 5),
    "b": SYSTEM + (9, 2, 6),
    "c": SYSTEM + (3, 1, 4, 1, 5),
    "d": (7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7),
    "e": (8,),
}


@pytest.mark.parametrize("page_size", [1, 2, 4])
@pytest.mark.parametrize("chunked_prefill_size", [-1, 5, 8])
def test_outputs_equal_the_reference_under_chunking_and_sharing(page_size: int, chunked_prefill_size: int) -> None:
    """Reverse-verified: dropping the duplicate-page swap in KvMemory.commit (keeping the
    request's own copy of pages the cache already held) fails this test via the audit."""
    scheduler, _ = build(slots=96, page_size=page_size, chunked_prefill_size=chunked_prefill_size)
    stop = StopConditions(max_new_tokens=9, ignore_eos=True)
    for rid, prompt in PROMPTS.items():
        assert scheduler.add_request(Request(rid=rid, prompt_ids=prompt, stop=stop)) is None
    t = run_to_completion(scheduler)
    for rid, prompt in PROMPTS.items():
        assert t.tokens[rid] == reference_output(prompt, stop, 256), rid
        assert t.reasons[rid] == "length"


def test_second_request_with_a_cached_prompt_reports_its_hit() -> None:
    scheduler, _ = build(slots=64, page_size=4)
    stop = StopConditions(max_new_tokens=3, ignore_eos=True)
    prompt = tuple(range(1, 18))  # 17 tokens: 16 are whole pages, the last is always computed
    scheduler.add_request(Request(rid="first", prompt_ids=prompt, stop=stop))
    first = run_to_completion(scheduler)
    scheduler.add_request(Request(rid="second", prompt_ids=prompt, stop=stop))
    second = run_to_completion(scheduler)
    assert first.cached["first"] == 0
    assert second.cached["second"] == 16
    assert second.tokens["second"] == first.tokens["first"] == reference_output(prompt, stop, 256)
    metrics = scheduler.metrics()
    assert metrics.cached_tokens == 16
    assert metrics.admitted_tokens == 34
    assert metrics.cache_hit_rate == pytest.approx(16 / 34)


def test_a_prompt_that_is_all_whole_pages_still_computes_its_last_page() -> None:
    """A fully cached prompt leaves its last page to compute, so a token can be sampled."""
    scheduler, executor = build(slots=64, page_size=4)
    stop = StopConditions(max_new_tokens=2, ignore_eos=True)
    prompt = tuple(range(1, 9))
    scheduler.add_request(Request(rid="x", prompt_ids=prompt, stop=stop))
    run_to_completion(scheduler)
    executor.keep_batches = True
    scheduler.add_request(Request(rid="y", prompt_ids=prompt, stop=stop))
    t = run_to_completion(scheduler)
    first = executor.batches[0].requests[0]
    assert (first.prefix_len, first.extend_len) == (4, 4)
    assert t.cached["y"] == 4
    assert t.tokens["y"] == reference_output(prompt, stop, 256)


def test_stop_token_eos_and_ignore_eos() -> None:
    prompt = (5, 6, 7)
    free_run = reference_output(prompt, StopConditions(max_new_tokens=12, ignore_eos=True), 256)
    third = free_run[2]
    assert third not in free_run[:2]
    scheduler, _ = build()
    scheduler.add_request(
        Request(
            rid="stop", prompt_ids=prompt, stop=StopConditions(max_new_tokens=12, stop_token_ids=frozenset({third}))
        )
    )
    scheduler.add_request(
        Request(rid="eos", prompt_ids=prompt, stop=StopConditions(max_new_tokens=12, eos_token_ids=frozenset({third})))
    )
    scheduler.add_request(
        Request(
            rid="ignored",
            prompt_ids=prompt,
            stop=StopConditions(max_new_tokens=12, eos_token_ids=frozenset({third}), ignore_eos=True),
        )
    )
    t = run_to_completion(scheduler)
    assert t.tokens["stop"] == t.tokens["eos"] == free_run[:3]
    assert t.reasons["stop"] == t.reasons["eos"] == "stop"
    assert t.tokens["ignored"] == free_run
    assert t.reasons["ignored"] == "length"


def test_generation_ends_at_the_context_length() -> None:
    scheduler, _ = build(model_max_length=512, context_length=10)
    prompt = (1, 2, 3, 4, 5, 6)
    scheduler.add_request(Request(rid="r", prompt_ids=prompt, stop=StopConditions(max_new_tokens=100, ignore_eos=True)))
    t = run_to_completion(scheduler)
    assert len(t.tokens["r"]) == 4
    assert t.reasons["r"] == "length"


def test_top_logprobs_reach_the_event() -> None:
    scheduler, _ = build()
    scheduler.add_request(Request(rid="r", prompt_ids=(1, 2), sampling=SamplingParams(logprobs=True, top_logprobs=2)))
    events = scheduler.step()
    assert events[0].logprob == -0.5
    assert events[0].top_logprobs is not None and len(events[0].top_logprobs) == 2
