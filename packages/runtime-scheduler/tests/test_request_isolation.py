"""One request's failure is its own: a request the executor reports failed ends alone while the
rest of its batch advances; only an unrecoverable fault propagates out of step().

The executor is the KV-faithful fake (scheduler_fakes.py), which stands in for the runner; the
real runner's sampling failure is driven through the real scheduler in tests/test_request_isolation.py.
"""

from __future__ import annotations

import msgspec
import pytest
from scheduler_fakes import FakeOutput, KvFaithfulExecutor, reference_output, run_to_completion

from config_bags import publish
from config_bags.server import Bags, ScheduleBag
from runtime_scheduler import ForwardBatch, Request, Scheduler, StopConditions

LONG = StopConditions(max_new_tokens=12, ignore_eos=True)
PROMPTS = {"a": (1, 2, 3, 4, 5), "b": (1, 2, 3, 4, 6, 7), "bad": (1, 2, 3, 4, 5, 9), "c": (8, 8, 8)}


class FailsOneRequest(KvFaithfulExecutor):
    """Reports request `rid` failed the `at`-th time it samples (its token replaced by -1 and an
    error), and, when `error` is None, answers -1 with no error instead (a malformed answer)."""

    def __init__(self, slots: int, page_size: int, rid: str, at: int, error: str | None) -> None:
        super().__init__(slots, page_size)
        self.rid, self.at, self.error = rid, at, error
        self.samples = 0

    def forward(self, batch: ForwardBatch) -> FakeOutput:
        out = super().forward(batch)
        rows = [i for i, r in enumerate(batch.requests) if r.rid == self.rid and r.sample]
        if not rows:
            return out
        self.samples += 1
        if self.samples != self.at:
            return out
        i = rows[0]
        tokens = out.next_token_ids[:i] + (-1,) + out.next_token_ids[i + 1 :]
        errors = out.errors[:i] + (self.error,) + out.errors[i + 1 :]
        return msgspec.structs.replace(out, next_token_ids=tokens, errors=errors)


def _scheduler(executor: KvFaithfulExecutor) -> Scheduler:
    return Scheduler(executor, model_max_length=100, max_total_tokens=64)


@pytest.mark.parametrize("at", [1, 4], ids=["at its prefill", "mid-decode"])
def test_a_request_reported_failed_fails_alone_and_the_rest_of_its_batch_is_unaffected(at: int) -> None:
    """The failing request shares prefix pages with the others. It ends with an "abort" event
    carrying the executor's error; every other request's tokens equal the reference; the audit
    passes after every step; its id can be used again and is served. Reverse-verified: with
    Scheduler._fail not releasing, the audit found the failed request's pages owned by no one;
    with both output.errors and the token check ignored in _absorb, "bad" decoded on with -1 in
    its output and finished by "length"."""
    publish(Bags(schedule=ScheduleBag(page_size=2, chunked_prefill_size=4)), role="standalone")
    executor = FailsOneRequest(64, 2, "bad", at, "request failed while sampling: OverflowError: too big")
    scheduler = _scheduler(executor)
    for rid, prompt in PROMPTS.items():
        scheduler.add_request(Request(rid=rid, prompt_ids=prompt, stop=LONG))
    t = run_to_completion(scheduler)
    assert t.reasons["bad"] == "abort"
    assert len(t.tokens.get("bad", [])) == at - 1
    for rid in ("a", "b", "c"):
        assert t.tokens[rid] == reference_output(PROMPTS[rid], LONG, 100), rid
    metrics = scheduler.metrics()
    assert (metrics.num_failed, metrics.num_finished, metrics.num_running) == (1, 3, 0)
    assert metrics.free_pages + metrics.evictable_pages == metrics.total_pages
    scheduler.add_request(Request(rid="bad", prompt_ids=PROMPTS["bad"], stop=LONG))
    assert run_to_completion(scheduler).tokens["bad"] == reference_output(PROMPTS["bad"], LONG, 100)


def test_the_failed_request_s_event_names_the_cause() -> None:
    """The client is told the executor's own sentence. Reverse-verified: with output.errors ignored
    in _absorb, the event said "the executor returned token -1" instead."""
    publish(Bags(schedule=ScheduleBag(page_size=2)), role="standalone")
    scheduler = _scheduler(FailsOneRequest(64, 2, "bad", 1, "request failed while sampling: OverflowError: too big"))
    scheduler.add_request(Request(rid="a", prompt_ids=PROMPTS["a"], stop=LONG))
    scheduler.add_request(Request(rid="bad", prompt_ids=PROMPTS["bad"], stop=LONG))
    events = {e.rid: e for e in scheduler.step()}
    assert events["bad"].finish_reason == "abort" and events["bad"].token_id is None
    assert events["bad"].error == "request failed while sampling: OverflowError: too big"
    assert events["a"].error is None and events["a"].token_id == reference_output(PROMPTS["a"], LONG, 100)[0]


def test_no_token_where_a_request_samples_fails_that_request_alone() -> None:
    """A malformed answer for one request (-1 where it samples, no error) is that request's
    failure. Reverse-verified: with the token check removed, -1 was appended to "bad"'s output
    and it decoded on to finish by "length"."""
    publish(Bags(schedule=ScheduleBag(page_size=2)), role="standalone")
    scheduler = _scheduler(FailsOneRequest(64, 2, "bad", 2, None))
    for rid, prompt in PROMPTS.items():
        scheduler.add_request(Request(rid=rid, prompt_ids=prompt, stop=LONG))
    t = run_to_completion(scheduler)
    assert t.reasons["bad"] == "abort" and len(t.tokens["bad"]) == 1
    for rid in ("a", "b", "c"):
        assert t.tokens[rid] == reference_output(PROMPTS[rid], LONG, 100), rid
    assert scheduler.metrics().num_failed == 1


class DeviceLost(RuntimeError):
    """How an executor marks its own device faults (the runner's DeviceFaultError does the same)."""

    unrecoverable = True


class Unrecoverable(KvFaithfulExecutor):
    """Raises `error` from the forward of the first batch of three requests."""

    def __init__(self, slots: int, page_size: int, error: BaseException) -> None:
        super().__init__(slots, page_size)
        self.error: BaseException | None = error

    def forward(self, batch: ForwardBatch) -> FakeOutput:
        if len(batch.requests) == 3 and self.error is not None:
            error, self.error = self.error, None
            raise error
        return super().forward(batch)


@pytest.mark.parametrize(
    "error",
    [MemoryError("out of host memory"), DeviceLost("device lost"), KeyboardInterrupt()],
    ids=["MemoryError", "marked unrecoverable", "KeyboardInterrupt"],
)
def test_an_unrecoverable_fault_propagates_after_the_step_s_pages_are_given_back(error: BaseException) -> None:
    """Only an unrecoverable fault escapes step(), and the scheduler is left whole: every request
    stands where it stood before the step (the audit passes, the free pages are as before), so
    nothing is half-done while the process ends. Reverse-verified: with is_unrecoverable answering
    False, the three requests failed with error events and nothing propagated; without the shrink
    before the re-raise, the audit reported a request holding more pages than its computed tokens."""
    publish(Bags(schedule=ScheduleBag(page_size=2, chunked_prefill_size=4)), role="standalone")
    scheduler = _scheduler(Unrecoverable(64, 2, error))
    prompts = {"a": (1, 2, 3), "b": (1, 2, 3, 4, 5, 6, 7, 8, 9), "c": (4, 4, 4, 4)}
    scheduler.add_request(Request(rid="a", prompt_ids=prompts["a"], stop=LONG))
    scheduler.step()
    scheduler.add_request(Request(rid="b", prompt_ids=prompts["b"], stop=LONG))
    scheduler.add_request(Request(rid="c", prompt_ids=prompts["c"], stop=LONG))
    free_before = scheduler.metrics().free_pages
    with pytest.raises(type(error)):
        scheduler.step()
    scheduler.audit()
    metrics = scheduler.metrics()
    assert (metrics.free_pages, metrics.num_running, metrics.num_failed) == (free_before, 3, 0)
    t = run_to_completion(scheduler)
    for rid in ("b", "c"):
        assert t.tokens[rid] == reference_output(prompts[rid], LONG, 100)
    assert t.tokens["a"] == reference_output(prompts["a"], LONG, 100)[1:]
