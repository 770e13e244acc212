"""A request that fails reaches its client as a clear error and leaves nothing behind: the
detokenizer carries the scheduler's cause, the tokenizer manager (over real ZMQ pipes) raises it
and forgets the request, a request it cannot even send (an int no msgpack holds) fails the same
way, the HTTP answer is an OpenAI-shaped 500, and /metrics counts the failures.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq

import config_bags
from config_bags.server import Bags, ModelBag, ServingBag
from runtime_scheduler import Request, SamplingParams
from serve.detokenizer.request_text import RequestText
from serve.http.streams import fault_error
from serve.ipc.channels import Addresses, Receiver, Sender
from serve.ipc.messages import GenerateRequest, Message, TextBatch, TextOutput, TokenDelta
from serve.tokenizer.eos import eos_token_ids
from serve.tokenizer.loading import load_tokenizer
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.request_state import RequestFailedError, ServerFaultError
from serve_testing.tiny_checkpoint import build_tokenizer

CAUSE = "request failed while sampling: ValueError: Overflow when unpacking long long"


@pytest.fixture(scope="module")
def tokenizer_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("tok")
    build_tokenizer(folder)
    return folder


@pytest.fixture
def tokenizer(tokenizer_folder: Path) -> Iterator[Any]:
    """The tiny tokenizer, loaded as the server loads it (from the published model bag)."""
    config_bags.publish(
        Bags(model=ModelBag(tokenizer_path=str(tokenizer_folder)), serving=ServingBag(stream_interval=4)),
        role="standalone",
    )
    yield load_tokenizer()
    config_bags.unpublish()


def test_the_detokenizer_passes_the_failure_on(tokenizer: Any) -> None:
    """Tokens held back by the stream interval, then the failure: the finishing output carries
    the cause. Reverse-verified: without `failure=out.failure` in RequestText._emit, the client's
    last output was a plain abort."""
    state = RequestText(tokenizer, GenerateRequest(request=Request(rid="r", prompt_ids=(1,))))
    held, _ = state.advance(TokenDelta(rid="r", new_ids=tuple(tokenizer.encode("Hello"))[:2]))
    assert held is None
    out, stopped = state.advance(TokenDelta(rid="r", new_ids=(), finish="abort", failure=CAUSE))
    assert out is not None and not stopped
    assert (out.finish, out.failure, out.error) == ("abort", CAUSE, None)


class ManagerRig:
    """A real TokenizerManager with the test at the scheduler's and the detokenizer's ends of its pipes."""

    def __init__(self, tokenizer: Any) -> None:
        addresses = Addresses.fresh()
        self.manager = TokenizerManager(eos_token_ids(tokenizer), addresses)
        self.context: zmq.Context[Any] = zmq.Context()
        self.scheduler_end = Receiver(self.context, addresses.schedulers[0])
        self.to_manager = Sender(self.context, addresses.tokenizer)

    async def received_by_scheduler(self) -> list[Message]:
        """What reached the scheduler's pipe within a second."""
        got: list[Message] = []
        for _ in range(20):
            await asyncio.sleep(0.05)
            got.extend(self.scheduler_end.drain())
        return got


@pytest.fixture
def rig(tokenizer: Any) -> Iterator[ManagerRig]:
    made = ManagerRig(tokenizer)
    yield made
    made.manager.close()
    made.context.destroy(linger=0)


async def _outputs(generator: AsyncIterator[TextOutput]) -> list[TextOutput]:
    return [out async for out in generator]


def _generate(rid: str, sampling: SamplingParams | None = None) -> GenerateRequest:
    return GenerateRequest(request=Request(rid=rid, prompt_ids=(1, 2), sampling=sampling or SamplingParams()))


def test_a_request_that_cannot_be_sent_fails_and_leaves_no_entry(rig: ManagerRig) -> None:
    """A GenerateRequest built directly with seed 2**70 (past the HTTP bounds) cannot be encoded.
    generate() raises RequestFailedError naming the cause, nothing reaches the scheduler, the
    failure is counted, and the same id is then sent and served. Reverse-verified: with the send
    outside the try in TokenizerManager.generate, the bare OverflowError escaped (a generic 500,
    the entry left behind); without the `del` of the entry, the second request never reached the
    scheduler (generate refused its id as already in flight)."""

    async def scenario() -> list[TextOutput]:
        receive = asyncio.create_task(rig.manager.receive_forever())
        try:
            with pytest.raises(
                RequestFailedError, match=r"could not be sent to the scheduler: OverflowError: can't serialize ints"
            ):
                await _outputs(rig.manager.generate(_generate("r", SamplingParams(seed=2**70))))
            assert await rig.received_by_scheduler() == []
            served = asyncio.create_task(_outputs(rig.manager.generate(_generate("r"))))
            assert [m.rid for m in await rig.received_by_scheduler() if isinstance(m, GenerateRequest)] == ["r"]
            rig.to_manager.send(
                TextBatch(outputs=(TextOutput(rid="r", text="hi", new_ids=(7,), finish="length", completion_tokens=1),))
            )
            return await asyncio.wait_for(served, 10)
        finally:
            receive.cancel()

    outputs = asyncio.run(scenario())
    assert [(o.text, o.finish) for o in outputs] == [("hi", "length")]
    assert (rig.manager.metrics.requests_failed, rig.manager.metrics.requests_finished) == (1, 1)


def test_a_request_the_scheduler_failed_raises_its_cause_and_is_forgotten(rig: ManagerRig) -> None:
    """The detokenizer's failed output ends generate() with RequestFailedError(cause) after the
    tokens already delivered; no abort is sent back (the scheduler already freed it), and the id
    is free again. Reverse-verified: without the `item.failure` check in generate(), the failed
    output was yielded as an ordinary "abort" finish and no error reached the client; without the
    count in _deliver (or its /metrics row), the failure went uncounted."""

    async def scenario() -> tuple[list[TextOutput], list[Message], list[Message]]:
        receive = asyncio.create_task(rig.manager.receive_forever())
        delivered: list[TextOutput] = []

        async def consume() -> None:
            async for out in rig.manager.generate(_generate("r")):
                delivered.append(out)

        try:
            task = asyncio.create_task(consume())
            await rig.received_by_scheduler()
            rig.to_manager.send(TextBatch(outputs=(TextOutput(rid="r", text="He", new_ids=(5,)),)))
            rig.to_manager.send(
                TextBatch(outputs=(TextOutput(rid="r", text="", new_ids=(), finish="abort", failure=CAUSE),))
            )
            with pytest.raises(RequestFailedError, match="Overflow when unpacking long long"):
                await asyncio.wait_for(task, 10)
            after = await rig.received_by_scheduler()
            again = asyncio.create_task(consume())
            resent = await rig.received_by_scheduler()
            again.cancel()
            return delivered, after, resent
        finally:
            receive.cancel()

    delivered, after, resent = asyncio.run(scenario())
    assert [o.text for o in delivered] == ["He"]
    assert after == []  # no AbortRequest for a request the scheduler already ended
    assert [m.rid for m in resent if isinstance(m, GenerateRequest)] == ["r"]
    assert rig.manager.metrics.requests_failed == 1
    assert "serve_requests_failed_total 1" in rig.manager.metrics.render()


def test_a_failed_request_is_answered_with_an_openai_shaped_500() -> None:
    """Reverse-verified: without the RequestFailedError case in fault_error, the failure was
    answered 503 "server_unavailable", as if a process had died."""
    failed = fault_error(RequestFailedError(CAUSE))
    assert failed.status == 500
    assert failed.body() == {
        "error": {"message": CAUSE, "type": "server_error", "param": None, "code": "request_failed"}
    }
    assert json.loads(failed.response().body)["error"]["message"] == CAUSE
    died = fault_error(ServerFaultError("the scheduler process died"))
    assert died.status == 503 and died.code == "server_unavailable"
