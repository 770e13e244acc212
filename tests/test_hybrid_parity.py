"""Gated-DeltaNet hybrids (Qwen3-Next MoE and dense, Qwen3.5 text) served by the real runner,
scheduler and workers as serve builds them (`build_scheduler`), against transformers' own fp32
greedy output on tiny random checkpoints:

- 16 prompts, several sharing long prefixes, all submitted together (the scheduler batches them,
  prefills them in chunks that split prompts, and decodes them together), at page sizes 1 and 16;
- the same requests one at a time;
- under ngram speculation (the verify keeps each draft token's state and the next forward commits
  the accepted one) and with a hybrid draft model (whose proposal steps keep their states too);
- the page and state-slot audit after every step, and no prefix reuse: a hybrid request computes
  its whole prompt (its hit count stays 0).

Reverse-verified by hand: with LinearAttnPlanner._resume not restoring the kept state (the slot
keeps the verify's starting state), the ngram case fails on every family and the draft-model case
fails; with has_initial always False (each chunk starting from zeros), the chunked case fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import config_bags
from config_bags.server import Bags, ExecBag, KernelBag, MemoryBag, ModelBag, ScheduleBag, SpecBag
from runtime_scheduler import Request, SamplingParams, Scheduler, StopConditions
from serve.scheduler_process.process import build_scheduler
from serve.scheduler_process.runners import ModelRunners
from serve_testing.tiny_hybrid_checkpoint import build_tiny_hybrid_checkpoint, reference_greedy

pytestmark = pytest.mark.timeout(900)

NEW_TOKENS = 12
_SHARED = tuple((5 * j) % 97 + 3 for j in range(40))
# Eight prompts of their own (some repeat a span, which ngram drafts from), eight sharing a 40-token prefix.
PROMPTS = (
    [tuple((7 * i + j) % 60 + 3 for j in range(9)) * 3 for i in range(4)]
    + [tuple(range(40 + i, 52 + 3 * i)) for i in range(4)]
    + [_SHARED + tuple(range(100 + i, 104 + 2 * i)) for i in range(8)]
)
CHECKPOINTS: dict[str, dict[str, object]] = {
    "qwen3_next-moe": {"family": "qwen3_next"},
    "qwen3_next-dense": {
        "family": "qwen3_next",
        "moe": False,
        "layer_types": ["full_attention", "linear_attention", "linear_attention", "full_attention", "linear_attention"],
    },
    "qwen3_next-mixed-mlp": {"family": "qwen3_next", "mlp_only_layers": (1, 4), "seed": 3},
    "qwen3_5": {"family": "qwen3_5", "seed": 1},
}


@pytest.fixture(scope="module")
def hybrid(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Path, list[list[int]]]]:
    """A tiny checkpoint by name, with transformers' greedy continuation of PROMPTS (built once)."""
    built: dict[str, tuple[Path, list[list[int]]]] = {}

    def get(name: str) -> tuple[Path, list[list[int]]]:
        if name not in built:
            folder = build_tiny_hybrid_checkpoint(tmp_path_factory.mktemp(name), **CHECKPOINTS[name])  # type: ignore[arg-type]
            built[name] = (folder, reference_greedy(folder, PROMPTS, NEW_TOKENS))
        return built[name]

    return get


@pytest.fixture
def hybrid_scheduler(unpublished: None) -> Iterator[Callable[..., tuple[Scheduler, ModelRunners]]]:
    def build(
        model_dir: Path,
        *,
        page_size: int = 1,
        chunk: int = 8192,
        spec: SpecBag | None = None,
        linear_attn_backend: str = "torch_native",
    ) -> tuple[Scheduler, ModelRunners]:
        config_bags.unpublish()
        config_bags.publish(
            Bags(
                model=ModelBag(model_path=str(model_dir), dtype="float32"),
                memory=MemoryBag(max_total_tokens=16384),
                schedule=ScheduleBag(page_size=page_size, max_prefill_tokens=8192, chunked_prefill_size=chunk),
                spec=spec or SpecBag(),
                exec=ExecBag(kernel=KernelBag(linear_attn_backend=linear_attn_backend)),
            ),
            role="standalone",
        )
        return build_scheduler()

    yield build
    config_bags.unpublish()


def _serve(scheduler: Scheduler, prompts: list[tuple[int, ...]], *, together: bool = True) -> list[list[int]]:
    """Each prompt's greedy tokens (all submitted at once, or one after another), with the page and
    state-slot audit after every step; no request reuses a cached prefix."""
    tokens: dict[str, list[int]] = {}

    def run(batch: list[tuple[int, ...]], offset: int) -> None:
        for i, prompt in enumerate(batch):
            rid = f"r{offset + i}"
            tokens[rid] = []
            request = Request(
                rid=rid,
                prompt_ids=prompt,
                sampling=SamplingParams(),
                stop=StopConditions(max_new_tokens=NEW_TOKENS, ignore_eos=True),
            )
            assert scheduler.add_request(request) is None
        while scheduler.has_work():
            for event in scheduler.step():
                assert event.error is None, event.error
                assert event.cached_tokens == 0, f"a hybrid request reused {event.cached_tokens} cached tokens"
                if event.token_id is not None:
                    tokens[event.rid].append(event.token_id)
            scheduler.audit()

    if together:
        run(prompts, 0)
    else:
        for i, prompt in enumerate(prompts):
            run([prompt], i)
    return [tokens[f"r{i}"] for i in range(len(prompts))]


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("name", sorted(CHECKPOINTS))
def test_batched_and_chunked_greedy_output_equals_transformers(
    name: str,
    page_size: int,
    hybrid: Callable[[str], tuple[Path, list[list[int]]]],
    hybrid_scheduler: Callable[..., tuple[Scheduler, ModelRunners]],
) -> None:
    folder, reference = hybrid(name)
    scheduler, runners = hybrid_scheduler(folder, page_size=page_size, chunk=16)
    assert runners.target.state_slots > 0 and runners.target.linear_attn_backends.decode == "torch_native"
    assert _serve(scheduler, PROMPTS) == reference


def test_requests_one_at_a_time_equal_transformers(
    hybrid: Callable[[str], tuple[Path, list[list[int]]]],
    hybrid_scheduler: Callable[..., tuple[Scheduler, ModelRunners]],
) -> None:
    folder, reference = hybrid("qwen3_next-moe")
    scheduler, _ = hybrid_scheduler(folder, page_size=16)
    assert _serve(scheduler, PROMPTS[::3], together=False) == reference[::3]


@pytest.mark.parametrize("name", sorted(CHECKPOINTS))
def test_ngram_speculation_keeps_the_greedy_output(
    name: str,
    hybrid: Callable[[str], tuple[Path, list[list[int]]]],
    hybrid_scheduler: Callable[..., tuple[Scheduler, ModelRunners]],
) -> None:
    folder, reference = hybrid(name)
    scheduler, _ = hybrid_scheduler(folder, spec=SpecBag(speculative_algorithm="ngram"))
    assert _serve(scheduler, PROMPTS[:8], together=False) == reference[:8]
    assert _serve(scheduler, PROMPTS) == reference
    assert scheduler.metrics().spec_verify_steps > 0


def test_a_hybrid_draft_model_keeps_the_greedy_output(
    hybrid: Callable[[str], tuple[Path, list[list[int]]]],
    hybrid_scheduler: Callable[..., tuple[Scheduler, ModelRunners]],
) -> None:
    """The draft (Qwen3.5 over the same vocabulary) keeps its own states per proposal step and
    rolls back to the accepted one at its next catch-up."""
    folder, reference = hybrid("qwen3_next-moe")
    draft, _ = hybrid("qwen3_5")
    scheduler, runners = hybrid_scheduler(
        folder,
        spec=SpecBag(
            speculative_algorithm="draft_model", speculative_draft_model_path=str(draft), speculative_num_steps=3
        ),
    )
    assert runners.draft is not None and runners.draft.state_slots == runners.target.state_slots
    assert _serve(scheduler, PROMPTS[:6], together=False) == reference[:6]
    assert _serve(scheduler, PROMPTS) == reference


@pytest.mark.parametrize("backend", ["cpu_fused", "triton"])
def test_every_linear_attention_backend_serves_the_same_output(
    backend: str,
    hybrid: Callable[[str], tuple[Path, list[list[int]]]],
    hybrid_scheduler: Callable[..., tuple[Scheduler, ModelRunners]],
) -> None:
    """cpu_fused (the CPU default) and triton (in its interpreter here, so on four prompts: two of
    their own, two sharing the long prefix) through chunked prefill, decode and ngram verify: the
    tokens torch_native and transformers give."""
    folder, reference = hybrid("qwen3_next-moe")
    chosen = list(range(len(PROMPTS))) if backend == "cpu_fused" else [0, 1, 8, 9]
    scheduler, runners = hybrid_scheduler(
        folder, page_size=16, chunk=16, spec=SpecBag(speculative_algorithm="ngram"), linear_attn_backend=backend
    )
    assert tuple(runners.target.linear_attn_backends) == (backend, backend, backend)
    assert _serve(scheduler, [PROMPTS[i] for i in chosen]) == [reference[i] for i in chosen]
