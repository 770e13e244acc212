"""The API the serving loop uses: refusals, aborts, metrics, flush, and the guards on misuse."""

import msgspec
import pytest
from scheduler_fakes import KvFaithfulExecutor, build, reference_output, run_to_completion

from config_bags import override, publish
from config_bags.server import Bags, ScheduleBag
from runtime_scheduler import Request, Scheduler, SchedulerMetrics, StopConditions

LONG = StopConditions(max_new_tokens=20, ignore_eos=True)


def test_a_prompt_that_fills_the_context_is_refused_and_leaves_no_trace() -> None:
    scheduler, _ = build(model_max_length=8)
    refusal = scheduler.add_request(Request(rid="r", prompt_ids=tuple(range(8))))
    assert refusal is not None and refusal.rid == "r"
    assert "prompt has 8 tokens but the context length is 8" in refusal.reason
    assert "at most 7" in refusal.reason
    assert not scheduler.has_work()
    assert scheduler.step() == []
    # Refused, so the rid is free to use again.
    assert (
        scheduler.add_request(Request(rid="r", prompt_ids=tuple(range(7)), stop=StopConditions(max_new_tokens=1)))
        is None
    )


def test_a_prompt_longer_than_the_pool_is_refused() -> None:
    scheduler, _ = build(slots=16, page_size=4, model_max_length=1000)
    refusal = scheduler.add_request(Request(rid="r", prompt_ids=tuple(range(17))))
    assert refusal is not None
    assert refusal.reason == "prompt has 17 tokens but the whole KV pool holds 16; a prompt may have at most 16"
    assert scheduler.metrics().num_waiting == 0


def test_context_length_override_is_read_at_admission() -> None:
    scheduler, _ = build(model_max_length=100)
    override("admin", context_length=5)
    assert scheduler.add_request(Request(rid="r", prompt_ids=tuple(range(6)))) is not None


def test_a_full_queue_refuses_new_requests() -> None:
    scheduler, _ = build(max_queued_requests=2)
    assert scheduler.add_request(Request(rid="a", prompt_ids=(1,))) is None
    assert scheduler.add_request(Request(rid="b", prompt_ids=(1,))) is None
    refusal = scheduler.add_request(Request(rid="c", prompt_ids=(1,)))
    assert refusal is not None and "waiting queue is full (2 requests, max_queued_requests=2)" in refusal.reason


def test_a_live_rid_cannot_be_added_twice() -> None:
    scheduler, _ = build()
    scheduler.add_request(Request(rid="a", prompt_ids=(1,)))
    with pytest.raises(ValueError, match="request id 'a' is already waiting or running; accepted: an id not in use"):
        scheduler.add_request(Request(rid="a", prompt_ids=(2,)))
    assert scheduler.metrics().num_waiting == 1


def test_add_request_takes_only_requests() -> None:
    scheduler, _ = build()
    with pytest.raises(TypeError, match="takes a runtime_scheduler.Request, got dict"):
        scheduler.add_request({"rid": "a"})  # type: ignore[arg-type]


def test_abort_frees_everything_and_unknown_or_finished_rids_do_nothing() -> None:
    """Reverse-verified: without the release in Scheduler.abort the flushed pool is short of pages."""
    scheduler, _ = build(slots=64, page_size=2)
    scheduler.add_request(Request(rid="running", prompt_ids=tuple(range(1, 10)), stop=LONG))
    scheduler.add_request(Request(rid="done", prompt_ids=(3, 4), stop=StopConditions(max_new_tokens=1)))
    scheduler.step()
    scheduler.add_request(Request(rid="waiting", prompt_ids=(5, 6), stop=LONG))
    assert scheduler.abort("running") is True
    assert scheduler.abort("waiting") is True
    assert scheduler.abort("done") is False
    assert scheduler.abort("never-seen") is False
    assert scheduler.abort("running") is False
    assert not scheduler.has_work()
    scheduler.audit()
    metrics = scheduler.metrics()
    assert (metrics.num_aborted, metrics.num_finished) == (2, 1)
    scheduler.flush_cache()
    assert scheduler.metrics().free_pages == scheduler.metrics().total_pages


def test_abort_mid_prefill_keeps_the_computed_chunks_cached() -> None:
    scheduler, _ = build(slots=64, page_size=4, chunked_prefill_size=8)
    prompt = tuple(range(1, 30))
    scheduler.add_request(Request(rid="a", prompt_ids=prompt, stop=LONG))
    scheduler.step()
    scheduler.step()
    scheduler.abort("a")
    scheduler.add_request(Request(rid="b", prompt_ids=prompt, stop=LONG))
    t = run_to_completion(scheduler)
    assert t.cached["b"] == 16
    assert t.tokens["b"] == reference_output(prompt, LONG, 256)


def test_metrics_are_a_frozen_snapshot() -> None:
    scheduler, _ = build(slots=32, page_size=2)
    scheduler.add_request(Request(rid="a", prompt_ids=(1, 2, 3), stop=LONG))
    scheduler.add_request(Request(rid="b", prompt_ids=(4, 5, 6), stop=LONG))
    scheduler.step()
    metrics = scheduler.metrics()
    assert isinstance(metrics, SchedulerMetrics)
    assert (metrics.num_running, metrics.num_waiting, metrics.total_pages) == (2, 0, 16)
    assert metrics.token_usage == pytest.approx((16 - metrics.free_pages - metrics.evictable_pages) / 16)
    with pytest.raises(AttributeError):
        metrics.num_running = 5  # type: ignore[misc]
    assert msgspec.json.decode(msgspec.json.encode(metrics), type=SchedulerMetrics) == metrics


def test_a_pool_smaller_than_a_page_is_refused() -> None:
    publish(Bags(schedule=ScheduleBag(page_size=16)), role="standalone")
    with pytest.raises(ValueError, match="max_total_tokens=8 is not accepted; accepted: at least one page"):
        Scheduler(KvFaithfulExecutor(8, 16), model_max_length=100, max_total_tokens=8)


def test_a_page_size_change_after_the_pool_was_built_is_refused() -> None:
    scheduler, _ = build(slots=64, page_size=4)
    override("admin", page_size=8)
    with pytest.raises(RuntimeError, match="page_size is now 8 but the KV pool was built as 16 pages over 64 slots"):
        scheduler.step()


def test_an_executor_answering_the_wrong_count_fails_its_step() -> None:
    """An answer of the wrong shape is the whole step's failure: its request ends with the shape
    error (pages freed, audit clean) and the scheduler serves the next request. Reverse-verified:
    with the count check removed, the short answer raised IndexError out of step()."""

    class Short(KvFaithfulExecutor):
        def forward(self, batch):  # type: ignore[no-untyped-def]
            out = super().forward(batch)
            return msgspec.structs.replace(out, next_token_ids=out.next_token_ids[:-1])

    publish(Bags(), role="standalone")
    scheduler = Scheduler(Short(64, 1), model_max_length=100, max_total_tokens=64)
    scheduler.add_request(Request(rid="a", prompt_ids=(1,)))
    events = scheduler.step()
    assert [(e.rid, e.token_id, e.finish_reason) for e in events] == [("a", None, "abort")]
    assert events[0].error is not None
    assert (
        "(token ids, logprobs, top logprobs, errors) of lengths (0, 1, 1, 1) for a batch of 1 requests"
        in events[0].error
    )
    scheduler.audit()
    assert not scheduler.has_work() and scheduler.metrics().num_failed == 1


def test_a_failed_forward_fails_that_step_s_requests_frees_their_pages_and_serving_goes_on() -> None:
    """The forward of a step raises an ordinary exception: exactly the requests of that step end
    with an error event naming it, their pages are freed (only computed full pages stay, cached and
    evictable), the request still waiting is untouched, and later requests are served as if
    nothing had happened. Reverse-verified: without the release in Scheduler._fail the audit
    found the step's pages owned by no one; with every exception propagated after the undo (the
    old handler) the OSError escaped step()."""

    class FailsOnce(KvFaithfulExecutor):
        failed = False

        def forward(self, batch):  # type: ignore[no-untyped-def]
            if len(batch.requests) == 3 and not self.failed:
                self.failed = True
                raise OSError("the disk went away")
            return super().forward(batch)

    publish(Bags(schedule=ScheduleBag(page_size=2, chunked_prefill_size=4, max_running_requests=3)), role="standalone")
    scheduler = Scheduler(FailsOnce(64, 2), model_max_length=100, max_total_tokens=64)
    prompts = {"a": (1, 2, 3), "b": (1, 2, 3, 4, 5, 6, 7, 8, 9), "c": (4, 4, 4, 4), "d": (5, 6, 7), "e": (1, 2, 3, 9)}
    scheduler.add_request(Request(rid="a", prompt_ids=prompts["a"], stop=LONG))
    scheduler.step()
    for rid in ("b", "c", "d"):  # d waits: the running cap is 3
        scheduler.add_request(Request(rid=rid, prompt_ids=prompts[rid], stop=LONG))
    events = scheduler.step()
    assert sorted((e.rid, e.finish_reason) for e in events) == [("a", "abort"), ("b", "abort"), ("c", "abort")]
    for e in events:
        assert (
            e.token_id is None
            and e.error == "request failed: the model forward of its step raised OSError: the disk went away"
        )
    scheduler.audit()
    metrics = scheduler.metrics()
    assert (metrics.num_running, metrics.num_waiting, metrics.num_failed, metrics.num_finished) == (0, 1, 3, 0)
    assert metrics.free_pages + metrics.evictable_pages == metrics.total_pages
    scheduler.add_request(Request(rid="e", prompt_ids=prompts["e"], stop=LONG))
    scheduler.add_request(Request(rid="a", prompt_ids=prompts["a"], stop=LONG))  # its id is free again
    t = run_to_completion(scheduler)
    for rid in ("d", "e", "a"):
        assert t.tokens[rid] == reference_output(prompts[rid], LONG, 100)
    assert scheduler.metrics().num_finished == 3
