"""Verify steps inside continuous batching, with a KV-faithful executor: whatever drafts a
speculator proposes, right or wrong, every request's output equals the reference model's greedy
output, and the page audit passes after every step (rejected drafts' pages given back).

The speculator here is a scripted one (it is not the component under test; spec_workers' real
workers are tested over the real runner in tests/test_speculative_sampling.py): it proposes the
model's true continuation with a deterministic share of its drafts corrupted, and accepts by the
equality test spec_workers uses.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from scheduler_fakes import VOCAB, KvFaithfulExecutor, next_token_of, reference_output, run_to_completion

import config_bags
from config_bags import publish
from config_bags.server import Bags, ModelBag, ScheduleBag, SpecBag
from runtime_scheduler import DraftRequest, Request, Scheduler, StopConditions

SYSTEM = tuple(range(1, 14))
PROMPTS = {
    "a": SYSTEM + (3, 1, 4, 1, 5),
    "b": SYSTEM + (9, 2, 6),
    "c": SYSTEM + (3, 1, 4, 1, 5),
    "d": (7,) * 21,
    "e": (8,),
    "f": tuple(range(30, 52)),
}


class ScriptedSpeculator:
    """Proposes the true continuation, corrupting drafts where (rid, position) says so."""

    def __init__(self, wrong_every: int) -> None:
        self.wrong_every = wrong_every
        self.offers: list[tuple[int, int]] = []  # (max_drafts, outputs so far) of each offer
        self.forgotten: set[str] = set()

    def propose(self, requests: Sequence[DraftRequest]) -> list[list[int]]:
        drafts = []
        for r in requests:
            self.offers.append((r.max_drafts, len(r.output_ids)))
            context = [*r.prompt_ids, *r.output_ids]
            own: list[int] = []
            for _ in range(r.max_drafts):
                token = next_token_of(context)
                position = len(context)
                if self.wrong_every and (position + len(r.rid)) % self.wrong_every == 0:
                    token = (token + 1) % VOCAB
                own.append(token)
                context.append(token)
            drafts.append(own)
        return drafts

    def verify(self, rid: str, drafts: Sequence[int], samples: Sequence[int]) -> int:
        count = 0
        while count < len(drafts) and drafts[count] == samples[count]:
            count += 1
        return count

    def forget(self, rid: str) -> None:
        self.forgotten.add(rid)


def build_speculative(
    *, slots: int, wrong_every: int, num_draft_tokens: int = 4, **schedule: object
) -> tuple[Scheduler, KvFaithfulExecutor, ScriptedSpeculator]:
    bags = Bags(
        schedule=ScheduleBag(**schedule),
        model=ModelBag(),  # type: ignore[arg-type]
        spec=SpecBag(speculative_algorithm="ngram", speculative_num_draft_tokens=num_draft_tokens),
    )
    publish(bags, role="standalone")
    executor, speculator = KvFaithfulExecutor(slots, bags.schedule.page_size), ScriptedSpeculator(wrong_every)
    return (
        Scheduler(executor, model_max_length=256, max_total_tokens=slots, speculator=speculator),
        executor,
        speculator,
    )


@pytest.mark.parametrize("page_size", [1, 4])
@pytest.mark.parametrize("wrong_every", [0, 2, 3])
@pytest.mark.parametrize("slots", [48, 200])
def test_outputs_equal_the_reference_whatever_is_accepted(page_size: int, wrong_every: int, slots: int) -> None:
    """48 slots make requests retract and re-admit mid-generation; 200 do not.

    Reverse-verified: without the pages of rejected drafts given back (`shrink_to_computed` in
    `_absorb_verify`), the audit fails on the first rejection ("request a holds 22 pages for 19
    tokens"); with `SpeculativeDecoding._reserve_draft_pages` answering `room` whether or not the
    pool gave its pages, drafts land in pages the request does not hold and request a's output
    diverges."""
    scheduler, executor, speculator = build_speculative(
        slots=slots, wrong_every=wrong_every, page_size=page_size, chunked_prefill_size=8, max_prefill_tokens=48
    )
    stop = StopConditions(max_new_tokens=15, ignore_eos=True)
    for rid, prompt in PROMPTS.items():
        assert scheduler.add_request(Request(rid=rid, prompt_ids=prompt, stop=stop)) is None
    executor.keep_batches = True
    t = run_to_completion(scheduler)
    for rid, prompt in PROMPTS.items():
        assert t.tokens[rid] == reference_output(prompt, stop, 256), rid
        assert t.reasons[rid] == "length"
    metrics = scheduler.metrics()
    assert metrics.spec_verify_steps == sum(b.forward_mode == "target_verify" for b in executor.batches) > 0
    assert sum(metrics.spec_accept_length_counts) > 0 and metrics.spec_accepted_tokens <= metrics.spec_draft_tokens
    if wrong_every == 0:
        assert metrics.spec_accepted_tokens == metrics.spec_draft_tokens
    else:
        assert 0 < metrics.spec_accepted_tokens < metrics.spec_draft_tokens
    assert speculator.forgotten == set(PROMPTS)


def test_a_verify_never_mixes_with_prompt_work_and_offers_fit_the_request() -> None:
    scheduler, executor, speculator = build_speculative(
        slots=200, wrong_every=3, chunked_prefill_size=4, max_prefill_tokens=8
    )
    stop = StopConditions(max_new_tokens=6, ignore_eos=True)
    for rid, prompt in PROMPTS.items():
        scheduler.add_request(Request(rid=rid, prompt_ids=prompt, stop=stop))
    executor.keep_batches = True
    run_to_completion(scheduler)
    for batch in executor.batches:
        if batch.forward_mode == "target_verify":
            assert all(r.prefix_len + r.extend_len - 1 >= len(r.prompt_ids) for r in batch.requests)
            assert max(r.extend_len for r in batch.requests) <= 4
    # never more drafts than the request's remaining tokens leave room for (one is the target's own)
    assert all(most <= stop.max_new_tokens - done - 1 for most, done in speculator.offers)
    assert all(1 <= most <= 3 for most, _ in speculator.offers)


def test_a_stop_token_inside_the_accepted_drafts_ends_the_request_there() -> None:
    scheduler, _, _ = build_speculative(slots=200, wrong_every=0)
    prompt = PROMPTS["f"]
    free = reference_output(prompt, StopConditions(max_new_tokens=30, ignore_eos=True), 256)
    stop_token = free[5]  # drafted and accepted inside a verify, the request must end at its first occurrence
    stop = StopConditions(max_new_tokens=30, stop_token_ids=frozenset({stop_token}))
    scheduler.add_request(Request(rid="s", prompt_ids=prompt, stop=stop))
    t = run_to_completion(scheduler)
    assert t.tokens["s"] == reference_output(prompt, stop, 256) == free[: free.index(stop_token) + 1]
    assert t.reasons["s"] == "stop"


def test_the_draft_budget_is_read_at_each_step() -> None:
    """Reverse-verified: with the budget fixed at 3 drafts in `SpeculativeDecoding.drafts_for` (as
    if read once), the verifies after the override still carried 4 tokens and this failed."""
    scheduler, executor, _ = build_speculative(slots=200, wrong_every=0)
    stop = StopConditions(max_new_tokens=40, ignore_eos=True)
    scheduler.add_request(Request(rid="a", prompt_ids=PROMPTS["a"], stop=stop))
    executor.keep_batches = True
    for _ in range(4):
        scheduler.step()
    assert max(r.extend_len for r in executor.batches[-1].requests) == 4
    config_bags.override("admin", speculative_num_draft_tokens=2)
    executor.batches.clear()
    run_to_completion(scheduler)
    verifies = [b for b in executor.batches if b.forward_mode == "target_verify"]
    assert verifies and all(r.extend_len <= 2 for b in verifies for r in b.requests)


class _Overreaching(ScriptedSpeculator):
    def propose(self, requests: Sequence[DraftRequest]) -> list[list[int]]:
        return [[1] * (r.max_drafts + 1) for r in requests]


def test_a_speculator_that_breaks_its_offer_fails_that_step_and_the_scheduler_serves_on() -> None:
    publish(Bags(spec=SpecBag(speculative_algorithm="ngram")), role="standalone")
    executor = KvFaithfulExecutor(128, 1)
    scheduler = Scheduler(executor, model_max_length=256, max_total_tokens=128, speculator=_Overreaching(0))
    scheduler.add_request(
        Request(rid="x", prompt_ids=(1, 2, 3), stop=StopConditions(max_new_tokens=5, ignore_eos=True))
    )
    t = run_to_completion(scheduler)
    assert t.reasons["x"] == "abort" and "the speculator proposed" in (t.errors.get("x") or "")
    assert scheduler.metrics().num_failed == 1


def test_a_speculator_is_required_exactly_with_an_algorithm() -> None:
    publish(Bags(spec=SpecBag(speculative_algorithm="ngram")), role="standalone")
    with pytest.raises(ValueError, match="speculative_algorithm is 'ngram' but the scheduler was given no speculator"):
        Scheduler(KvFaithfulExecutor(16, 1), model_max_length=64, max_total_tokens=16)
    config_bags.unpublish()
    publish(Bags(), role="standalone")
    with pytest.raises(ValueError, match="given a speculator"):
        Scheduler(KvFaithfulExecutor(16, 1), model_max_length=64, max_total_tokens=16, speculator=ScriptedSpeculator(0))


def test_a_step_decoding_more_requests_than_the_limit_verifies_no_drafts() -> None:
    """Reverse-verified: without the limit read in `SpeculativeDecoding.drafts_for`, the four-request steps verified."""
    scheduler, executor, _ = build_speculative(slots=200, wrong_every=0)
    config_bags.override("admin", speculative_disable_by_batch_size=3)
    stop = StopConditions(max_new_tokens=8, ignore_eos=True)
    for rid in "abcd":
        scheduler.add_request(Request(rid=rid, prompt_ids=PROMPTS[rid], stop=stop))
    executor.keep_batches = True
    t = run_to_completion(scheduler)
    assert all(b.forward_mode != "target_verify" for b in executor.batches if len(b.requests) > 3)
    assert not any(b.forward_mode == "target_verify" for b in executor.batches)
    assert all(t.tokens[rid] == reference_output(PROMPTS[rid], stop, 256) for rid in "abcd")
    config_bags.override("admin", speculative_disable_by_batch_size=4)
    scheduler.add_request(Request(rid="e", prompt_ids=PROMPTS["e"], stop=stop))
    run_to_completion(scheduler)
    assert any(b.forward_mode == "target_verify" for b in executor.batches)


def test_a_step_shares_its_draft_limit_evenly_among_its_requests() -> None:
    """Reverse-verified: without the share in `SpeculativeDecoding.drafts_for`, four requests were each offered 7."""
    scheduler, executor, speculator = build_speculative(slots=400, wrong_every=0, num_draft_tokens=8)
    config_bags.override("admin", speculative_max_drafts_per_step=8)
    stops = {
        rid: StopConditions(max_new_tokens=n, ignore_eos=True) for rid, n in zip("abcd", (60, 12, 12, 12), strict=True)
    }
    for rid in "abcd":
        scheduler.add_request(Request(rid=rid, prompt_ids=PROMPTS[rid], stop=stops[rid]))
    executor.keep_batches = True
    t = run_to_completion(scheduler)
    verifies = [b for b in executor.batches if b.forward_mode == "target_verify"]
    assert verifies and all(len(b.input_ids) <= len(b.requests) + 8 for b in verifies)
    assert {most for most, _ in speculator.offers} >= {2, 7}  # 8 // 4 each at four, the whole 7 alone at the end
    assert all(t.tokens[rid] == reference_output(PROMPTS[rid], stops[rid], 256) for rid in "abcd")
