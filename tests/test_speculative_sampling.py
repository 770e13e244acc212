"""Speculative decoding over the real runners, scheduler and workers, as serve builds them
(`build_scheduler`), on tiny checkpoints:

- greedy and seeded-sampled requests (temperature, top-p, top-k, min-p, penalties) get exactly the
  tokens they get without speculation, alone and 32 together, under both algorithms;
- unseeded sampled requests follow the target's distribution: the histogram of the sequences
  800 requests drew matches non-speculative sampling's;
- the draft runner stamps its own backend (the override), and "the backend this forward
  dispatches to" answers it on the draft runner.

Reverse-verified by hand: with spec_workers.acceptance.accepted_count_of accepting every draft,
the greedy identity fails for both algorithms and the histogram distance jumps past the bound.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import config_bags
from attn_backends import serving_attention_backend
from config_bags.server import Bags, ExecBag, KernelBag, MemoryBag, ModelBag, ScheduleBag, SpecBag
from runtime_scheduler import Request, SamplingParams, Scheduler, StopConditions
from serve.scheduler_process.process import build_scheduler
from serve.scheduler_process.runners import ModelRunners

pytestmark = pytest.mark.timeout(900)

PROMPTS = [tuple((7 * i + j) % 60 + 3 for j in range(10)) * 3 for i in range(8)] + [
    tuple(range(40 + i, 52 + i)) for i in range(8)
]
SAMPLINGS = [
    SamplingParams(),
    SamplingParams(temperature=0.8, top_p=0.9, top_k=20, seed=11),
    SamplingParams(
        temperature=1.0, min_p=0.05, seed=12, repetition_penalty=1.1, frequency_penalty=0.3, presence_penalty=0.2
    ),
    SamplingParams(temperature=0.6, seed=13, logprobs=True, top_logprobs=2),
]


@pytest.fixture
def spec_scheduler(unpublished: None) -> Iterator[Callable[..., tuple[Scheduler, ModelRunners]]]:
    def build(
        model_dir: Path, spec: SpecBag | None = None, exec: ExecBag | None = None
    ) -> tuple[Scheduler, ModelRunners]:
        config_bags.unpublish()
        config_bags.publish(
            Bags(
                model=ModelBag(model_path=str(model_dir), dtype="float32"),
                memory=MemoryBag(max_total_tokens=16384),
                schedule=ScheduleBag(max_prefill_tokens=8192, chunked_prefill_size=8192),
                spec=spec or SpecBag(),
                exec=exec or ExecBag(),
            ),
            role="standalone",
        )
        return build_scheduler()

    yield build
    config_bags.unpublish()


Answer = tuple[tuple[int, ...], tuple[float | None, ...]]


def _serve(scheduler: Scheduler, requests: list[Request]) -> dict[str, Answer]:
    """Every request's tokens and logprobs, all submitted at once; the page audit after each step."""
    tokens: dict[str, list[int]] = {r.rid: [] for r in requests}
    logprobs: dict[str, list[float | None]] = {r.rid: [] for r in requests}
    for r in requests:
        assert scheduler.add_request(r) is None
    while scheduler.has_work():
        for event in scheduler.step():
            assert event.error is None, event.error
            if event.token_id is not None:
                tokens[event.rid].append(event.token_id)
                logprobs[event.rid].append(event.logprob)
        scheduler.audit()
    return {rid: (tuple(tokens[rid]), tuple(logprobs[rid])) for rid in tokens}


def _requests(new_tokens: int) -> list[Request]:
    return [
        Request(
            rid=f"r{i}",
            prompt_ids=PROMPTS[i % len(PROMPTS)],
            sampling=SAMPLINGS[i % len(SAMPLINGS)],
            stop=StopConditions(max_new_tokens=new_tokens, ignore_eos=True),
        )
        for i in range(32)
    ]


@pytest.mark.parametrize("algorithm", ["ngram", "draft_model"])
@pytest.mark.parametrize("architecture", ["LlamaForCausalLM", "Qwen3ForCausalLM"])
def test_greedy_and_seeded_requests_get_the_tokens_they_get_without_speculation(
    algorithm: str,
    architecture: str,
    tiny_checkpoint: Callable[..., Path],
    spec_scheduler: Callable[..., tuple[Scheduler, ModelRunners]],
) -> None:
    target = tiny_checkpoint(architecture)
    requests = _requests(24)
    plain, _ = spec_scheduler(target)
    alone = {r.rid: _serve(plain, [r])[r.rid] for r in requests}
    draft = {} if algorithm == "ngram" else {"speculative_draft_model_path": str(target)}
    speculative, _ = spec_scheduler(target, SpecBag(speculative_algorithm=algorithm, **draft))  # type: ignore[arg-type]
    together = _serve(speculative, requests)
    assert [rid for rid in alone if together[rid] != alone[rid]] == []
    assert {r.rid: _serve(speculative, [r])[r.rid] for r in requests[:4]} == {r.rid: alone[r.rid] for r in requests[:4]}
    metrics = speculative.metrics()
    assert metrics.spec_verify_steps > 0 and metrics.spec_accepted_tokens > 0


def _histogram(scheduler: Scheduler, prompt: tuple[int, ...], count: int, new_tokens: int) -> Counter[tuple[int, ...]]:
    """How often each sequence of `new_tokens` tokens came out, over `count` requests of `prompt`."""
    seen: Counter[tuple[int, ...]] = Counter()
    for wave in range(0, count, 100):  # a wave prefills in one step, then decodes (and verifies) alone
        requests = [
            Request(
                rid=f"h{i}",
                prompt_ids=prompt,
                sampling=SamplingParams(temperature=1.0, top_k=2),
                stop=StopConditions(max_new_tokens=new_tokens, ignore_eos=True),
            )
            for i in range(wave, wave + 100)
        ]
        seen.update(tokens for tokens, _ in _serve(scheduler, requests).values())
    return seen


def _total_variation(a: Counter[tuple[int, ...]], b: Counter[tuple[int, ...]]) -> float:
    n, m = sum(a.values()), sum(b.values())
    return 0.5 * sum(abs(a[t] / n - b[t] / m) for t in set(a) | set(b))


@pytest.mark.parametrize("algorithm", ["ngram", "draft_model"])
def test_unseeded_sampling_follows_the_targets_distribution(
    algorithm: str, tiny_checkpoint: Callable[..., Path], spec_scheduler: Callable[..., tuple[Scheduler, ModelRunners]]
) -> None:
    """800 requests of one prompt, 3 tokens each drawn at temperature 1 from each step's top 2:
    the total-variation distance between the histograms of the 8 possible sequences with and
    without speculation stays under 0.1 (sampling noise at this size is about 0.03), and
    speculation did accept drafts. The prompt repeats a passage after the model's own greedy
    continuation of it, so that prompt lookup proposes the likeliest tokens too."""
    target = tiny_checkpoint("LlamaForCausalLM")
    plain, _ = spec_scheduler(target)
    seed = PROMPTS[0]
    greedy = _serve(plain, [Request(rid="g", prompt_ids=seed, stop=StopConditions(max_new_tokens=8, ignore_eos=True))])[
        "g"
    ][0]
    prompt = seed + greedy + seed
    reference = _histogram(plain, prompt, 800, 3)
    draft = {} if algorithm == "ngram" else {"speculative_draft_model_path": str(target)}
    speculative, _ = spec_scheduler(
        target, SpecBag(speculative_algorithm=algorithm, speculative_adaptive_min_accept_rate=0.0, **draft)
    )  # type: ignore[arg-type]
    observed = _histogram(speculative, prompt, 800, 3)
    assert _total_variation(reference, observed) < 0.1, (reference, observed)
    assert speculative.metrics().spec_accepted_tokens > 50


def test_the_draft_runner_stamps_and_dispatches_to_its_own_backend(
    tiny_checkpoint: Callable[..., Path], spec_scheduler: Callable[..., tuple[Scheduler, ModelRunners]]
) -> None:
    target = tiny_checkpoint("LlamaForCausalLM")
    spec = SpecBag(
        speculative_algorithm="draft_model",
        speculative_draft_model_path=str(target),
        speculative_draft_attention_backend="torch_native",
    )
    scheduler, runners = spec_scheduler(target, spec, ExecBag(kernel=KernelBag(enable_deterministic_inference=False)))
    assert runners.draft is not None
    assert tuple(runners.draft.attention_stamp) == ("torch_native", "torch_native", True)
    assert runners.target.attention_stamp.is_draft_override is False
    for mode in ("extend", "decode", "draft_extend"):
        assert serving_attention_backend(mode, runners.draft.attention_stamp) == "torch_native"
    assert serving_attention_backend("decode", runners.target.attention_stamp) == "cpu_paged"
    assert runners.draft.model.bytes_shared_with_target > 0  # type: ignore[attr-defined]
    answers = _serve(scheduler, _requests(8)[:4])
    assert all(len(tokens) == 8 for tokens, _ in answers.values())


def test_a_draft_that_is_its_target_has_every_draft_accepted(
    tiny_checkpoint: Callable[..., Path], spec_scheduler: Callable[..., tuple[Scheduler, ModelRunners]]
) -> None:
    """The draft's KV bookkeeping, measured: a draft that is its target proposes exactly the
    target's greedy tokens only while its cache holds the right keys at every position (the prompt
    caught up, each accepted draft's input, the one position after a fully accepted verify, the
    positions decoded while a step was too large to verify). So every draft is accepted.

    Reverse-verified: with `DraftModelWorker.verify` counting the last draft's position as held
    (`last + accepted + 1`), 41 of its 135 drafts were rejected."""
    target = tiny_checkpoint("LlamaForCausalLM")
    spec = SpecBag(
        speculative_algorithm="draft_model",
        speculative_draft_model_path=str(target),
        speculative_disable_by_batch_size=6,
    )
    scheduler, _ = spec_scheduler(target, spec)
    requests = [
        Request(rid=f"s{i}", prompt_ids=PROMPTS[i], stop=StopConditions(max_new_tokens=10 + 8 * i, ignore_eos=True))
        for i in range(10)
    ]  # ten at once decode unverified until four have finished
    answers = _serve(scheduler, requests)
    assert all(len(tokens) == 10 + 8 * i for i, (tokens, _) in enumerate(answers.values()))
    metrics = scheduler.metrics()
    assert metrics.spec_draft_tokens > 50 and metrics.spec_accepted_tokens == metrics.spec_draft_tokens
