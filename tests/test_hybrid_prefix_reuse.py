"""Hybrid models reuse cached prefixes through recurrent-state snapshots, served by the real
scheduler and runner as serve builds them (`build_scheduler`) on tiny Qwen3-Next and Qwen3.5
checkpoints: a request served from a snapshot gives bitwise the same tokens and logprobs as the
same request computed from scratch, alone or batched, and resumes at the deepest snapshot its
cached prefix reaches (a prefix ending between snapshots resumes at the one before); eviction
under a small snapshot budget, aborts mid-prefill, retraction and speculative decoding keep it so;
the page, state-slot and snapshot audit passes after every step.

"From scratch" is a scheduler with snapshots off (mamba_snapshot_memory_mb 0) and the prefill chunk
equal to the snapshot interval, so that both compute every prompt over the same chunk grid.
Reverse-verified by hand: with `LinearAttnPlanner._resume` ignoring `restore_from` (the slot keeps
the state of its previous request) the reuse cases fail; with `KvMemory.attach_prefix` resuming at
the deepest matched node with the state of the deepest snapshot above it, the followers' answers
change; with `StateSnapshots.slot_for_new` ignoring pins, the eviction case drops a snapshot a
request is about to restore (its assertion fires).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import config_bags
from config_bags.server import Bags, ExecBag, MambaBag, MemoryBag, ModelBag, ScheduleBag, SpecBag
from runtime_scheduler import Request, SamplingParams, Scheduler, StopConditions
from serve.scheduler_process.process import build_scheduler
from serve_testing.tiny_hybrid_checkpoint import build_tiny_hybrid_checkpoint

pytestmark = pytest.mark.timeout(900)

INTERVAL = 8
PAGE = 4
NEW_TOKENS = 6
BASE = tuple((5 * j) % 97 + 3 for j in range(37))  # snapshots at 8, 16, 24, 32
SAMPLINGS = (SamplingParams(logprobs=True), SamplingParams(temperature=0.8, seed=11, logprobs=True))
FAMILIES = {"qwen3_next": {"family": "qwen3_next"}, "qwen3_5": {"family": "qwen3_5", "seed": 1}}

Answer = tuple[tuple[int, ...], tuple[float | None, ...], int]  # tokens, logprobs, cached tokens


@pytest.fixture(scope="module", params=sorted(FAMILIES))
def hybrid(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_hybrid_checkpoint(tmp_path_factory.mktemp(request.param), **FAMILIES[request.param])  # type: ignore[arg-type]


@pytest.fixture
def scheduler_for(unpublished: None) -> Iterator[Callable[..., Scheduler]]:
    def build(model_dir: Path, *, snapshot_mb: float = 1.0, pool: int = 4096, spec: SpecBag | None = None) -> Scheduler:
        config_bags.unpublish()
        config_bags.publish(
            Bags(
                model=ModelBag(model_path=str(model_dir), dtype="float32"),
                memory=MemoryBag(max_total_tokens=pool),
                schedule=ScheduleBag(
                    page_size=PAGE,
                    chunked_prefill_size=INTERVAL,
                    max_prefill_tokens=min(pool, 4096),  # never cuts a chunk off the snapshot grid here
                    max_running_requests=8,
                ),
                spec=spec or SpecBag(),
                exec=ExecBag(mamba=MambaBag(mamba_snapshot_interval=INTERVAL, mamba_snapshot_memory_mb=snapshot_mb)),
            ),
            role="standalone",
        )
        return build_scheduler()[0]

    yield build
    config_bags.unpublish()


def served(
    scheduler: Scheduler, requests: list[Request], abort_after: dict[str, int] | None = None
) -> dict[str, Answer]:
    """Every request's answer, all submitted at once; `abort_after` aborts a request after that many
    steps. The full audit after every step."""
    tokens: dict[str, list[int]] = {r.rid: [] for r in requests}
    logprobs: dict[str, list[float | None]] = {r.rid: [] for r in requests}
    cached: dict[str, int] = {}
    for r in requests:
        assert scheduler.add_request(r) is None
    steps = 0
    while scheduler.has_work():
        for rid, at in (abort_after or {}).items():
            if steps == at:
                scheduler.abort(rid)
        for event in scheduler.step():
            assert event.error is None, event.error
            if event.token_id is not None:
                tokens[event.rid].append(event.token_id)
                logprobs[event.rid].append(event.logprob)
                cached.setdefault(event.rid, event.cached_tokens)
        scheduler.audit()
        steps += 1
    return {rid: (tuple(tokens[rid]), tuple(logprobs[rid]), cached.get(rid, -1)) for rid in tokens}


def request(rid: str, prompt: tuple[int, ...], sampling: SamplingParams = SAMPLINGS[0]) -> Request:
    return Request(
        rid=rid, prompt_ids=prompt, sampling=sampling, stop=StopConditions(max_new_tokens=NEW_TOKENS, ignore_eos=True)
    )


def without_cache(answers: dict[str, Answer]) -> dict[str, tuple[tuple[int, ...], tuple[float | None, ...]]]:
    return {rid: (tokens, lps) for rid, (tokens, lps, _) in answers.items()}


# Prompts after BASE is cached: a repeat, a longer one, one whose shared prefix ends between
# snapshots (21 tokens: resumes at 16), one sharing less than a snapshot, each greedy and seeded.
FOLLOWERS = {
    "repeat": (BASE, 32),
    "longer": (BASE + (7, 8, 9, 10, 11, 12, 13, 14, 15), 32),  # BASE decoded past 40, keeping no snapshot
    "between": (BASE[:21] + (90, 91, 92, 93, 94), 16),
    "short": (BASE[:5] + (60, 61, 62, 63, 64, 65, 66), 0),
}


def followers() -> list[Request]:
    return [
        request(f"{name}-{i}", prompt, sampling)
        for name, (prompt, _) in FOLLOWERS.items()
        for i, sampling in enumerate(SAMPLINGS)
    ]


def test_served_from_a_snapshot_equals_computed_from_scratch(
    hybrid: Path, scheduler_for: Callable[..., Scheduler]
) -> None:
    """After BASE is served, each follower resumes at the deepest snapshot of its cached prefix
    (its cached_tokens says where) and answers bitwise as from scratch, batched and alone."""
    scratch = scheduler_for(hybrid, snapshot_mb=0.0)
    reference = {r.rid: served(scratch, [r])[r.rid] for r in followers()}
    assert all(cached == 0 for _, _, cached in reference.values())
    warm = scheduler_for(hybrid)
    served(warm, [request("base", BASE)])
    batched = served(warm, followers())
    assert without_cache(batched) == without_cache(reference)
    for rid, (_, _, cached) in batched.items():
        assert cached == FOLLOWERS[rid.split("-")[0]][1], rid
    # Alone, after the batch kept its own snapshots: some resume deeper now, with the same answers.
    alone = {r.rid: served(warm, [r])[r.rid] for r in followers()}
    assert without_cache(alone) == without_cache(reference)
    metrics = warm.metrics()
    assert metrics.cached_tokens > 0 and metrics.state_snapshots_held > 0


def test_a_small_snapshot_budget_evicts_and_stays_exact(hybrid: Path, scheduler_for: Callable[..., Scheduler]) -> None:
    """With room for three snapshots, new ones drop the least recently used (never one a request is
    about to restore); every answer still equals its from-scratch answer and the audit holds."""
    scratch = scheduler_for(hybrid, snapshot_mb=0.0)
    reference = {r.rid: served(scratch, [r])[r.rid] for r in followers()}
    tiny = scheduler_for(hybrid, snapshot_mb=1e-9)  # below one slot: none
    assert tiny.metrics().state_snapshot_slots == 0
    per_slot_mb = 1.0 / scheduler_for(hybrid).metrics().state_snapshot_slots
    small = scheduler_for(hybrid, snapshot_mb=3.5 * per_slot_mb)
    assert small.metrics().state_snapshot_slots == 3
    served(small, [request("base", BASE)])
    answers = served(small, followers())
    assert without_cache(answers) == without_cache(reference)
    metrics = small.metrics()
    assert metrics.state_snapshots_dropped > 0 and metrics.state_snapshots_held <= 3


def test_aborts_mid_prefill_and_retraction_keep_snapshots_exact(
    hybrid: Path, scheduler_for: Callable[..., Scheduler]
) -> None:
    """A request aborted while it prefills (a snapshot pending, one pinned) and a pool small enough
    to retract requests leave the audit clean and the other answers exact."""
    scratch = scheduler_for(hybrid, snapshot_mb=0.0)
    reference = {r.rid: served(scratch, [r])[r.rid] for r in followers()}
    warm = scheduler_for(hybrid, pool=96)
    served(warm, [request("base", BASE)])
    doomed = request("doomed", BASE + tuple(range(40, 70)))
    answers = served(warm, [doomed, *followers()], abort_after={"doomed": 2})
    del answers["doomed"]
    assert without_cache(answers) == without_cache(reference)
    assert warm.metrics().num_retractions > 0


@pytest.mark.parametrize("algorithm", ["ngram", "draft_model"])
def test_speculative_decoding_from_snapshots_stays_exact(
    hybrid: Path, scheduler_for: Callable[..., Scheduler], algorithm: str
) -> None:
    """Under ngram and draft-model speculation (the draft catches up from position 0; only the
    target resumes from snapshots), greedy followers answer as from scratch without speculation."""
    greedy = [r for r in followers() if r.sampling.temperature == 0.0]
    scratch = scheduler_for(hybrid, snapshot_mb=0.0)
    reference = {r.rid: served(scratch, [r])[r.rid] for r in greedy}
    draft = {"speculative_draft_model_path": str(hybrid)} if algorithm == "draft_model" else {}
    speculative = scheduler_for(hybrid, spec=SpecBag(speculative_algorithm=algorithm, **draft))  # type: ignore[arg-type]
    served(speculative, [request("base", BASE)])
    answers = served(speculative, greedy)
    assert [rid for rid in reference if answers[rid][0] != reference[rid][0]] == []
    assert all(answers[rid][2] > 0 for rid in answers if not rid.startswith("short"))
