"""Output constraints and logit bias, enforced by the real scheduler driving the real runner on a
tiny checkpoint, with the real xgrammar engine: every constrained output matches its schema or
regex (checked by jsonschema and `re`, not by the engine), a constrained request samples the same
tokens and logprobs alone or batched, a -100 bias bans a token and +100 forces one, a grammar that
does not compile or cannot go on fails its request alone, and the page audit stays clean.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import jsonschema
import pytest
import torch
from transformers import AutoTokenizer

import config_bags
from config_bags.server import Bags, MemoryBag, ModelBag, ScheduleBag, SpecBag
from runtime_runner.runner import ModelRunner
from runtime_runner.sampling.sampler import sample
from runtime_runner.standalone import Request as RunnerRequest
from runtime_runner.standalone import Sampling
from runtime_scheduler import OutputConstraint, Request, SamplingParams, Scheduler, StopConditions
from serve.grammar.xgrammar_engine import XGrammarEngine, tokenizer_info_of
from serve.scheduler_process.process import build_scheduler
from serve_testing.tiny_checkpoint import build_tiny_checkpoint

SCHEDULE = ScheduleBag(page_size=4, chunked_prefill_size=16, max_prefill_tokens=64, max_running_requests=4)
SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 99}},
    "required": ["ok", "n"],
    "additionalProperties": False,
}
JSON = OutputConstraint(kind="json_schema", text=json.dumps(SCHEMA))
REGEX = OutputConstraint(kind="regex", text="(yes|no) [0-9]{3}")
STOP = StopConditions(max_new_tokens=48, eos_token_ids=frozenset({2}))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny-constrained"))


@pytest.fixture
def runner(tiny: Path, standalone_runner: Callable[..., ModelRunner]) -> ModelRunner:
    return standalone_runner(tiny, schedule=SCHEDULE, memory=MemoryBag(max_total_tokens=512))


def engine(tiny: Path, runner: ModelRunner) -> XGrammarEngine:
    """The engine for the runner's vocabulary, ending at the tiny tokenizer's <|im_end|> (id 2)."""
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    info = tokenizer_info_of(tokenizer, runner.arch.vocab_size, [2])
    return XGrammarEngine(lambda: info, synchronous=False)


def scheduler_of(runner: ModelRunner, grammars: XGrammarEngine | None) -> Scheduler:
    return Scheduler(
        runner,
        model_max_length=runner.arch.max_position_embeddings,
        max_total_tokens=runner.pool.num_slots,
        grammars=grammars,
    )


def served(scheduler: Scheduler, requests: Iterable[Request]) -> dict[str, dict[str, object]]:
    """Each request's tokens, logprobs, finish reason and error, stepping until no work is left
    and auditing the pages after every step."""
    out: dict[str, dict[str, object]] = {}
    for request in requests:
        assert scheduler.add_request(request) is None
        out[request.rid] = {"tokens": [], "logprobs": [], "finish": None, "error": None}
    steps = 0
    while scheduler.has_work():
        for e in scheduler.step():
            entry = out[e.rid]
            if e.token_id is not None:
                entry["tokens"].append(e.token_id)  # type: ignore[attr-defined]
                entry["logprobs"].append(e.logprob)  # type: ignore[attr-defined]
            if e.finish_reason is not None:
                entry["finish"], entry["error"] = e.finish_reason, e.error
        scheduler.audit()
        steps += 1
        assert steps < 2000, "the scheduler made no progress"
    return out


def text_of(tiny: Path, tokens: object) -> str:
    tokenizer = AutoTokenizer.from_pretrained(tiny)
    assert isinstance(tokens, list)
    return str(tokenizer.decode([t for t in tokens if t != 2]))


def _request(rid: str, prompt: tuple[int, ...], constraint: OutputConstraint | None, **sampling: object) -> Request:
    return Request(
        rid=rid,
        prompt_ids=prompt,
        sampling=SamplingParams(constraint=constraint, logprobs=True, **sampling),  # type: ignore[arg-type]
        stop=STOP,
    )


def test_constrained_outputs_match_and_do_not_depend_on_the_batch(tiny: Path, runner: ModelRunner) -> None:
    """Greedy and seeded constrained requests match their schema and regex (validated by jsonschema
    and re), end with "stop" once their grammar is complete, and give bitwise the same tokens and
    logprobs alone as batched beside free requests. Reverse-verified: without the mask
    (`biased_and_masked` returning the logits unchanged) the tiny model's outputs are not JSON."""
    grammars = engine(tiny, runner)
    requests = [
        _request("json-greedy", (5, 6, 7, 8), JSON),
        _request("json-seeded", (9, 10, 11), JSON, temperature=0.9, seed=7),
        _request("regex", (12, 13), REGEX, temperature=0.7, seed=1),
        _request("free", (14, 15, 16), None, temperature=0.8, seed=3),
    ]
    batched = served(scheduler_of(runner, grammars), requests)
    for rid in ("json-greedy", "json-seeded"):
        assert batched[rid]["finish"] == "stop", batched[rid]
        jsonschema.validate(json.loads(text_of(tiny, batched[rid]["tokens"])), SCHEMA)
    assert batched["regex"]["finish"] == "stop"
    assert re.fullmatch(REGEX.text, text_of(tiny, batched["regex"]["tokens"]))
    for request in requests[:3]:
        alone = served(scheduler_of(runner, grammars), [request])[request.rid]
        assert alone == batched[request.rid], request.rid
    counts = grammars.counts()
    assert counts.compiles == 2 and counts.cache_hits >= 4, counts


def test_logit_bias_bans_and_forces_tokens(tiny: Path, runner: ModelRunner) -> None:
    """-100 keeps greedy decoding off the token it picks unbiased; +100 makes a token the pick.
    Reverse-verified: without the bias addition both assertions fail."""
    scheduler = scheduler_of(runner, None)
    prompt = (5, 6, 7, 8)
    first = served(scheduler, [_request("plain", prompt, None)])["plain"]["tokens"]
    assert isinstance(first, list)
    banned = first[0]
    out = served(scheduler, [_request("banned", prompt, None, logit_bias=((banned, -100.0),))])["banned"]["tokens"]
    assert isinstance(out, list) and banned not in out
    forced = (banned + 1) % runner.arch.vocab_size
    out = served(scheduler, [_request("forced", prompt, None, logit_bias=((forced, 100.0),))])["forced"]["tokens"]
    assert isinstance(out, list) and set(out) == {forced}


def test_a_grammar_that_does_not_compile_fails_its_request_alone(tiny: Path, runner: ModelRunner) -> None:
    """A constraint that does not compile fails alone with the compiler's message; the free request
    beside it finishes normally and the audit stays clean. Reverse-verified: without the exception
    branch of `Scheduler._take_grammar` the step raises out of the scheduler."""
    broken = OutputConstraint(kind="regex", text="a(b")
    requests = [_request("broken", (5, 6), broken), _request("free", (7, 8), None)]
    out = served(scheduler_of(runner, engine(tiny, runner)), requests)
    assert out["broken"]["finish"] == "abort" and "parenthesis is not closed" in str(out["broken"]["error"])
    assert out["free"]["finish"] in ("stop", "length") and out["free"]["error"] is None


@dataclass(frozen=True)
class _NoWayOn:
    """A grammar standing where no token may follow (what a matcher whose grammar needs a text no
    token spells would write): every bit of its row cleared."""

    def fill_next_token_bitmask(self, bitmask: torch.Tensor, index: int) -> bool:
        bitmask[index] = 0
        return True


def test_a_grammar_with_no_way_on_fails_its_request_alone(runner: ModelRunner) -> None:
    """The sampler fails a request whose grammar allows no next token, alone, with an error saying
    so; the request beside it samples the token it samples without it. Reverse-verified: without
    the check in `biased_and_masked` the stuck row samples token 0 from all -inf logits."""
    free = RunnerRequest("free", 0, 1, (0,), True, Sampling(), (5,), ())
    stuck = replace(free, rid="stuck", grammar=_NoWayOn())
    logits = torch.randn(2, runner.arch.vocab_size)
    out = sample(logits, [stuck, free], torch.Generator().manual_seed(0))
    assert out.token_ids[0] == -1 and "allows no next token" in str(out.errors[0])
    assert out.errors[1] is None and out.token_ids[1] == int(logits[1].argmax())


def test_a_constrained_request_is_refused_without_an_engine(runner: ModelRunner) -> None:
    """With no grammar engine (--grammar-backend none) a constrained request is refused, not served free."""
    refusal = scheduler_of(runner, None).add_request(_request("json", (5, 6), JSON))
    assert refusal is not None and "grammar" in refusal.reason


@pytest.mark.parametrize("algorithm", ["ngram", "draft_model"])
def test_constrained_requests_decode_plainly_beside_speculating_ones(
    tiny: Path, unpublished: None, algorithm: str
) -> None:
    """Built as serve builds it (build_scheduler, grammar engine from the serving bag): under ngram
    and draft-model speculation a constrained request is offered no drafts and gives the tokens it
    gives without speculation, valid against its schema, while the free requests beside it still
    speculate. Reverse-verified: with the `room = 0` line of `drafts_for` removed, the verify
    sampler refuses the constrained request's drafts and it fails."""

    def scheduler_with(spec: SpecBag) -> Scheduler:
        config_bags.unpublish()
        config_bags.publish(
            Bags(model=ModelBag(model_path=str(tiny), dtype="float32"), schedule=SCHEDULE, spec=spec),
            role="standalone",
        )
        return build_scheduler()[0]

    requests = [_request("json", (5, 6, 7, 8), JSON), _request("free", (5, 6, 7, 8, 5, 6, 7, 8), None)]
    plain = served(scheduler_with(SpecBag()), requests)
    draft = {"speculative_draft_model_path": str(tiny)} if algorithm == "draft_model" else {}
    speculative = scheduler_with(SpecBag(speculative_algorithm=algorithm, **draft))  # type: ignore[arg-type]
    assert served(speculative, requests) == plain
    jsonschema.validate(json.loads(text_of(tiny, plain["json"]["tokens"])), SCHEMA)
    assert speculative.metrics().spec_verify_steps > 0
