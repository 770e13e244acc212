"""One request never takes the others down, with the real scheduler driving the real runner on a
tiny checkpoint: a request whose sampling fails in the real sampler fails alone, a step whose
forward raises fails exactly that step's requests, and only a device fault (out of memory, a CUDA
error) or a MemoryError propagates out of step(). After every failure the page audit is clean and
later requests get the tokens they get on a scheduler that never saw the failure.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from attn_backends import AttentionStamp, build_attention_pair
from config_bags import publish
from config_bags.server import Bags, MemoryBag, ModelBag, ScheduleBag
from runtime_runner.attention_seam import AttentionBackend, AttentionMetadata
from runtime_runner.device_faults import DeviceFaultError
from runtime_runner.output import ForwardOutput
from runtime_runner.runner import ModelRunner
from runtime_scheduler import ForwardBatch, Request, SamplingParams, Scheduler, StopConditions
from serve.scheduler_process.process import build_scheduler

SCHEDULE = ScheduleBag(page_size=4, chunked_prefill_size=16, max_prefill_tokens=64, max_running_requests=3)
MEMORY = MemoryBag(max_total_tokens=256)
STOP = StopConditions(max_new_tokens=8, ignore_eos=True)
SHARED = tuple(range(3, 15))  # a prefix the requests share, so failed requests held cached pages others use


def _request(rid: str, tail: tuple[int, ...], sampling: SamplingParams | None = None) -> Request:
    return Request(rid=rid, prompt_ids=SHARED + tail, sampling=sampling or SamplingParams(), stop=STOP)


GOOD = [
    _request("greedy", (20, 21)),
    _request("logprobs", (22,), SamplingParams(logprobs=True, top_logprobs=2)),
    _request("seeded", (23, 24, 25), SamplingParams(temperature=0.8, seed=3)),
    _request("long", tuple(range(30, 60))),  # prefilled in chunks
]
LATER = [_request("later", (20, 21, 26)), Request(rid="fresh", prompt_ids=(40, 41, 42), stop=STOP)]


@dataclass
class Transcript:
    """What the events said, per request."""

    tokens: dict[str, list[int]] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def served(scheduler: Scheduler, requests: Iterable[Request], transcript: Transcript | None = None) -> Transcript:
    """Add `requests` (in an order that batches them together) and step until no work is left,
    auditing the pages after every step."""
    t = transcript or Transcript()
    for request in requests:
        assert scheduler.add_request(request) is None
    steps = 0
    while scheduler.has_work():
        for e in scheduler.step():
            assert e.rid not in t.reasons, f"event for {e.rid} after it finished"
            if e.token_id is not None:
                t.tokens.setdefault(e.rid, []).append(e.token_id)
            if e.finish_reason is not None:
                t.reasons[e.rid] = e.finish_reason
            if e.error is not None:
                t.errors[e.rid] = e.error
        scheduler.audit()
        steps += 1
        assert steps < 500, "the scheduler made no progress"
    return t


def scheduler_over(runner: ModelRunner) -> Scheduler:
    """A fresh scheduler (empty cache) over `runner`, as serve builds it."""
    return Scheduler(
        runner, model_max_length=runner.arch.max_position_embeddings, max_total_tokens=runner.pool.num_slots
    )


@pytest.fixture
def checkpoint(tiny_checkpoint: Callable[..., Path]) -> Path:
    """Wide weights, so greedy tokens do not hinge on rounding differences between batch shapes."""
    return tiny_checkpoint("LlamaForCausalLM", initializer_range=0.5)


def test_a_request_whose_sampling_fails_fails_alone(
    checkpoint: Path, standalone_runner: Callable[..., ModelRunner]
) -> None:
    """A Request built directly with top_k = 2**63 (bypassing the HTTP bounds) overflows the real
    sampler's top-k tensor, batched with two of four other requests that share its prefix pages.
    It fails with the cause; the others get exactly the tokens of a run without it; the audit is
    clean after every step; later requests (one reusing the failed request's cached prefix) are
    served as on a fresh scheduler. Reverse-verified: with runtime_runner.sampling.sampler.sample answering
    only the vectorized pass, the whole step failed ("greedy" and "logprobs" got the error too)."""
    runner = standalone_runner(checkpoint, schedule=SCHEDULE, memory=MEMORY)
    scheduler = scheduler_over(runner)
    bad = _request("bad", (20, 21, 27), SamplingParams(temperature=1.0, top_k=2**63))
    t = served(scheduler, [GOOD[0], bad, *GOOD[1:]])
    assert t.errors == {"bad": "request failed while sampling: ValueError: Overflow when unpacking long long"}
    assert t.reasons["bad"] == "abort" and "bad" not in t.tokens
    without = served(scheduler_over(runner), GOOD)
    assert {r.rid: t.tokens[r.rid] for r in GOOD} == without.tokens
    assert all(len(tokens) == STOP.max_new_tokens for tokens in without.tokens.values())
    later = served(scheduler, LATER)
    assert later.tokens == served(scheduler_over(runner), LATER).tokens and not later.errors
    metrics = scheduler.metrics()
    assert (metrics.num_failed, metrics.num_finished, metrics.num_running, metrics.num_waiting) == (1, 6, 0, 0)


class FailingForward:
    """The runner as the scheduler's executor, whose forward raises `error` once, after the runner
    computed (and wrote the KV of) the first batch holding request `rid`."""

    def __init__(self, runner: ModelRunner, rid: str, error: BaseException) -> None:
        self.runner = runner
        self.rid = rid
        self.error: BaseException | None = error
        self.failed_batch: set[str] = set()

    def forward(self, batch: ForwardBatch) -> ForwardOutput:
        out = self.runner.forward(batch)
        if self.error is not None and any(r.rid == self.rid for r in batch.requests):
            error, self.error = self.error, None
            self.failed_batch = {r.rid for r in batch.requests}
            raise error
        return out


def _publish(checkpoint: Path) -> None:
    publish(
        Bags(model=ModelBag(model_path=str(checkpoint), dtype="float32"), schedule=SCHEDULE, memory=MEMORY),
        role="standalone",
    )


def test_a_forward_that_raises_fails_exactly_its_step_s_requests(checkpoint: Path, unpublished: None) -> None:
    """Built as serve builds it (build_scheduler with an executor_of wrapper). Two requests decode
    when a third joins; the forward of that step raises after writing its KV. Exactly those three
    requests end with the error; the fourth, still waiting (the running cap is 3), and later ones
    (sharing the failed requests' cached prefix) get the tokens of a scheduler that never failed;
    the audit is clean after every step. Reverse-verified: with Scheduler.step propagating every
    exception after the undo (the old behaviour), the RuntimeError escaped step()."""
    _publish(checkpoint)
    holder: list[FailingForward] = []

    def failing(runner: ModelRunner) -> FailingForward:
        holder.append(FailingForward(runner, "joins", RuntimeError("the forward failed")))
        return holder[0]

    scheduler, runners = build_scheduler(failing)
    runner = runners.target
    t = Transcript()
    for request in GOOD[:2]:
        scheduler.add_request(request)
    for _ in range(3):
        scheduler.step()  # both prefilled and decoding
    joins, waits = _request("joins", (28, 29)), _request("waits", (20, 21, 30))
    served(scheduler, [joins, waits], t)
    message = "request failed: the model forward of its step raised RuntimeError: the forward failed"
    assert holder[0].failed_batch == {"greedy", "logprobs", "joins"}
    assert t.errors == dict.fromkeys(holder[0].failed_batch, message)
    assert all(t.reasons[rid] == "abort" for rid in holder[0].failed_batch)
    later = served(scheduler, LATER)
    fresh = scheduler_over(runner)
    assert t.tokens["waits"] == served(fresh, [waits]).tokens["waits"]
    assert later.tokens == served(scheduler_over(runner), LATER).tokens
    assert scheduler.metrics().num_failed == 3


def test_a_memory_error_from_the_forward_propagates(checkpoint: Path, unpublished: None) -> None:
    """Reverse-verified: with is_unrecoverable answering False for MemoryError, the step's
    requests failed with error events and step() returned."""
    _publish(checkpoint)
    scheduler, _ = build_scheduler(lambda runner: FailingForward(runner, "greedy", MemoryError("out of host memory")))
    scheduler.add_request(GOOD[0])
    with pytest.raises(MemoryError, match="out of host memory"):
        scheduler.step()
    scheduler.audit()
    assert (scheduler.metrics().num_running, scheduler.metrics().num_failed) == (1, 0)


@dataclass
class Trap:
    """An error the attention backend raises at its next attend, once."""

    error: BaseException | None = None


class TrappedBackend:
    """A real attention backend that raises the trap's error from inside the runner's forward."""

    def __init__(self, backend: AttentionBackend, trap: Trap) -> None:
        self._backend = backend
        self._trap = trap

    def stamp(self, effective_name: str) -> None:
        self._backend.stamp(effective_name)

    @property
    def effective_name(self) -> str:
        return self._backend.effective_name

    def plan(self, metadata: AttentionMetadata) -> None:
        self._backend.plan(metadata)

    def attend(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, *, scale: float) -> torch.Tensor:
        error, self._trap.error = self._trap.error, None
        if error is not None:
            raise error
        return self._backend.attend(q, k_cache, v_cache, scale=scale)

    def native_attention(self, dtype: torch.dtype, kv_dtype: torch.dtype) -> None:
        """None: the trap fires from attend, so the runner must take the op-by-op path that calls
        it rather than the native step, which would attend without passing through this wrapper."""
        return None


@pytest.fixture
def trapped(checkpoint: Path, standalone_runner: Callable[..., ModelRunner]) -> tuple[ModelRunner, Trap]:
    """A runner whose attention backends raise the trap's error (set after warm-up)."""
    trap = Trap()

    def factory(
        prefill: str, decode: str, *, device_type: str, is_draft_override: bool = False, batch_invariant: bool = False
    ) -> tuple[AttentionStamp, AttentionBackend]:
        stamp, backend = build_attention_pair(
            prefill,
            decode,
            device_type=device_type,
            is_draft_override=is_draft_override,
            batch_invariant=batch_invariant,
        )
        return stamp, TrappedBackend(backend, trap)

    return standalone_runner(checkpoint, factory=factory, schedule=SCHEDULE, memory=MEMORY), trap


DEVICE_FAULTS = {
    "out of memory": torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB"),
    "accelerator error": torch.AcceleratorError("CUDA error: device-side assert triggered"),
    "CUDA RuntimeError": RuntimeError("CUDA error: an illegal memory access was encountered"),
    "MemoryError": MemoryError("out of host memory"),
}


@pytest.mark.parametrize("name", sorted(DEVICE_FAULTS))
def test_a_device_fault_inside_the_runner_propagates_out_of_step(trapped: tuple[ModelRunner, Trap], name: str) -> None:
    """torch's device faults carry no mark the scheduler could read; the runner raises them as a
    DeviceFaultError (from the original), which step() lets propagate, the pages undone.
    Reverse-verified: without marked_device_faults in ModelRunner.forward, the out-of-memory,
    accelerator and CUDA cases failed the step's requests and step() returned (and the
    MemoryError came out unmarked)."""
    runner, trap = trapped
    scheduler = scheduler_over(runner)
    for request in GOOD[:2]:
        scheduler.add_request(request)
    scheduler.step()
    trap.error = DEVICE_FAULTS[name]
    with pytest.raises(DeviceFaultError, match="the device cannot go on") as raised:
        scheduler.step()
    assert raised.value.__cause__ is DEVICE_FAULTS[name]
    scheduler.audit()
    assert (scheduler.metrics().num_running, scheduler.metrics().num_failed) == (2, 0)


def test_an_ordinary_error_inside_the_runner_fails_the_step_and_serving_goes_on(
    trapped: tuple[ModelRunner, Trap],
) -> None:
    """A bug-like RuntimeError from inside the forward is no device fault: the step's requests
    fail, and the next requests are served as on a fresh scheduler. Reverse-verified: with
    is_device_fault answering True for every RuntimeError, a DeviceFaultError escaped step()."""
    runner, trap = trapped
    scheduler = scheduler_over(runner)
    trap.error = RuntimeError("shape mismatch in attention")
    t = served(scheduler, GOOD[:2])
    assert set(t.errors) == {"greedy", "logprobs"} and "RuntimeError: shape mismatch in attention" in t.errors["greedy"]
    assert served(scheduler, LATER).tokens == served(scheduler_over(runner), LATER).tokens
