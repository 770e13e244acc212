"""The scheduler process's loop over real ZMQ pipes, with the real scheduler and runner on a tiny
checkpoint: a request that fails in the scheduler reaches the detokenizer as an "abort" delta
carrying the cause, the others finish, and the loop serves the next request; an unrecoverable
fault propagates out of the loop (the process then ends and the launcher takes the server down).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

import config_bags
from config_bags.server import Bags, MemoryBag, ModelBag, ScheduleBag
from runtime_runner.output import ForwardOutput
from runtime_runner.runner import ModelRunner
from runtime_scheduler import ForwardBatch, ModelExecutor, Request, SamplingParams, StopConditions
from serve.ipc.channels import Addresses, Receiver, Sender
from serve.ipc.messages import GenerateRequest, SchedulerStats, TokenBatch, TokenDelta
from serve.scheduler_process.loop import SchedulerLoop
from serve.scheduler_process.process import build_scheduler
from serve_testing.tiny_checkpoint import build_tiny_checkpoint

STOP = StopConditions(max_new_tokens=6, ignore_eos=True)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "tiny-llama", max_position_embeddings=256)


@pytest.fixture
def published(checkpoint: Path) -> Iterator[None]:
    config_bags.publish(
        Bags(
            model=ModelBag(model_path=str(checkpoint), dtype="float32"),
            schedule=ScheduleBag(page_size=4, chunked_prefill_size=64, max_prefill_tokens=128),
            memory=MemoryBag(max_total_tokens=512),
        ),
        role="standalone",
    )
    yield
    config_bags.unpublish()


class Pipes:
    """The loop's inbox and outbox as real ipc pipes, with the test at their other ends."""

    def __init__(self) -> None:
        self.context: zmq.Context[Any] = zmq.Context()
        addresses = Addresses.fresh()
        self.inbox = Receiver(self.context, addresses.schedulers[0])
        self.to_loop = Sender(self.context, addresses.schedulers[0])
        self.from_loop = Receiver(self.context, addresses.detokenizer)
        self.outbox = Sender(self.context, addresses.detokenizer)
        self.deltas: dict[str, list[TokenDelta]] = {}
        self.stats: list[SchedulerStats] = []

    def run_until(self, loop: SchedulerLoop, done: Callable[[], bool], timeout_s: float = 60.0) -> None:
        """Run the loop, collecting what it sends, until `done()`."""
        deadline = time.monotonic() + timeout_s
        while not done():
            assert time.monotonic() < deadline, f"the loop did not get there; deltas so far: {self.deltas}"
            loop.run_once()
            while self.from_loop.poll(0):
                for message in self.from_loop.drain():
                    if isinstance(message, TokenBatch):
                        for delta in message.outputs:
                            self.deltas.setdefault(delta.rid, []).append(delta)
                    elif isinstance(message, SchedulerStats):
                        self.stats.append(message)

    def finished(self, *rids: str) -> Callable[[], bool]:
        return lambda: all(any(d.finish is not None for d in self.deltas.get(rid, ())) for rid in rids)


@pytest.fixture
def pipes() -> Iterator[Pipes]:
    made = Pipes()
    yield made
    made.context.destroy(linger=0)


def _request(rid: str, prompt: tuple[int, ...], sampling: SamplingParams | None = None) -> GenerateRequest:
    return GenerateRequest(
        request=Request(rid=rid, prompt_ids=prompt, sampling=sampling or SamplingParams(), stop=STOP)
    )


def test_a_failed_request_s_delta_carries_the_cause_and_the_loop_serves_on(published: None, pipes: Pipes) -> None:
    """top_k = 2**63 survives msgpack (it fits uint64) and overflows the real sampler. The loop
    sends that request one "abort" delta with the cause and no token, the two requests batched
    with it finish with all their tokens, the scheduler's stats count the failure, and a request
    sent afterwards is served. Reverse-verified: without `failure=event.error` in
    SchedulerLoop._deltas, the failed request's delta carried no cause (an abort the client could
    not tell from a disconnect); with the sampler's per-request retry and the scheduler's step
    isolation both removed (the code before), run_once raised ValueError "Overflow when
    unpacking long long" (the scheduler process died)."""
    scheduler, _ = build_scheduler()
    loop = SchedulerLoop(scheduler, pipes.inbox, pipes.outbox)
    prompt = (5, 6, 7, 8, 9, 10)
    for request in (
        _request("a", prompt),
        _request("bad", prompt + (11,), SamplingParams(temperature=1.0, top_k=2**63)),
        _request("b", prompt + (12,), SamplingParams(logprobs=True)),
    ):
        pipes.to_loop.send(request)
    pipes.run_until(loop, pipes.finished("a", "bad", "b"))
    (failed,) = pipes.deltas["bad"]
    assert (failed.finish, failed.new_ids, failed.error) == ("abort", (), None)
    assert failed.failure == "request failed while sampling: ValueError: Overflow when unpacking long long"
    for rid in ("a", "b"):
        assert pipes.deltas[rid][-1].finish == "length" and all(d.failure is None for d in pipes.deltas[rid])
        assert sum(len(d.new_ids) for d in pipes.deltas[rid]) == STOP.max_new_tokens
    pipes.to_loop.send(_request("later", prompt + (13,)))
    pipes.run_until(loop, pipes.finished("later"))
    assert sum(len(d.new_ids) for d in pipes.deltas["later"]) == STOP.max_new_tokens
    pipes.run_until(loop, lambda: any(s.metrics.num_failed == 1 and s.metrics.num_running == 0 for s in pipes.stats))
    scheduler.audit()


class OutOfMemory:
    """The runner as the executor, its forward raising MemoryError (a fault no request owns)."""

    def __init__(self, runner: ModelRunner) -> None:
        self.runner = runner

    def forward(self, batch: ForwardBatch) -> ForwardOutput:
        raise MemoryError("out of host memory")


def test_an_unrecoverable_fault_propagates_out_of_the_loop(published: None, pipes: Pipes) -> None:
    """Reverse-verified: with runtime_scheduler's is_unrecoverable answering False for MemoryError,
    run_once returned and the request's delta carried the error instead."""
    wrap: Callable[[ModelRunner], ModelExecutor] = OutOfMemory
    scheduler, _ = build_scheduler(wrap)
    loop = SchedulerLoop(scheduler, pipes.inbox, pipes.outbox)
    pipes.to_loop.send(_request("a", (5, 6, 7)))
    with pytest.raises(MemoryError, match="out of host memory"):
        pipes.run_until(loop, pipes.finished("a"))
    assert "a" not in pipes.deltas
