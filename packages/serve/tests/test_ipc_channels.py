"""Messages over real ZMQ ipc pipes: every kind round-trips, and a scheduler request is checked
again when it is decoded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
import zmq

from runtime_scheduler import Request, SamplingParams, SchedulerMetrics, StopConditions
from serve.ipc.channels import Addresses, Receiver, Sender, decode, encode
from serve.ipc.messages import (
    AbortRequest,
    GenerateRequest,
    LogprobEntry,
    Message,
    ModelInfo,
    OverrideAck,
    OverrideRequest,
    ProcessReady,
    RunnerStamp,
    SchedulerStats,
    TextBatch,
    TextOutput,
    TokenBatch,
    TokenDelta,
    TokenLogprob,
)

MESSAGES: list[Message] = [
    GenerateRequest(
        request=Request(
            rid="a",
            prompt_ids=(1, 2, 3),
            sampling=SamplingParams(temperature=0.7, top_k=5, seed=3, logprobs=True, top_logprobs=2),
            stop=StopConditions(max_new_tokens=9, stop_token_ids=frozenset({4}), eos_token_ids=frozenset({2})),
        ),
        stop_strings=("\n\n",),
        skip_special_tokens=False,
    ),
    AbortRequest(rid="a", reason="client disconnected"),
    OverrideRequest(seq=3, source="http", leaves={"max_running_requests": 4, "schedule_policy": "lpm"}),
    OverrideAck(seq=3, process="scheduler.dp1.tp0", config_hash="0123456789abcdef", error=None),
    ProcessReady(
        name="scheduler.dp1.tp0",
        role="scheduler",
        pid=42,
        config_hash="0123456789abcdef",
        role_check="enforce",
        model=ModelInfo(
            context_length=128,
            max_total_tokens=256,
            vocab_size=384,
            runners={
                "target": RunnerStamp(
                    prefill="torch_native", decode="cpu_paged", is_draft_override=False, batch_invariant=False
                )
            },
        ),
    ),
    TokenBatch(
        outputs=(
            TokenDelta(
                rid="a",
                new_ids=(7,),
                logprobs=(TokenLogprob(7, -0.5),),
                top_logprobs=((TokenLogprob(7, -0.5), TokenLogprob(8, -1.0)),),
            ),
            TokenDelta(rid="b", new_ids=(), finish="abort", error="queue full"),
        )
    ),
    TextBatch(
        outputs=(
            TextOutput(
                rid="a",
                text="hé",
                new_ids=(7,),
                finish="stop",
                matched_stop="\n",
                logprobs=(LogprobEntry(token="h", token_id=7, logprob=-0.5),),
            ),
        )
    ),
    SchedulerStats(
        metrics=SchedulerMetrics(
            num_running=1,
            num_waiting=2,
            total_pages=8,
            free_pages=3,
            cached_pages=2,
            evictable_pages=1,
            token_usage=0.5,
            admitted_tokens=10,
            cached_tokens=4,
            cache_hit_rate=0.4,
            num_retractions=1,
            num_finished=3,
            num_aborted=0,
        )
    ),
]


@pytest.mark.parametrize("message", MESSAGES, ids=lambda m: type(m).__name__)
def test_every_message_round_trips(message: Message) -> None:
    assert decode(encode(message)) == message


def test_pipe_carries_messages_in_order(tmp_path: Path) -> None:
    address = f"ipc://{tmp_path / 'pipe'}"
    context: zmq.Context[Any] = zmq.Context()
    try:
        receiver = Receiver(context, address)
        sender = Sender(context, address)
        for message in MESSAGES:
            sender.send(message)
        got: list[Message] = []
        while len(got) < len(MESSAGES) and receiver.poll(2000):
            got.extend(receiver.drain())
        assert got == MESSAGES
    finally:
        context.destroy(linger=0)


def test_a_bad_request_is_refused_on_decode() -> None:
    """The scheduler's own checks run on the wire too (msgspec calls __post_init__)."""
    raw = msgspec.to_builtins(MESSAGES[0])
    raw["request"]["sampling"]["temperature"] = -1.0
    with pytest.raises(msgspec.ValidationError, match="temperature"):
        decode(msgspec.msgpack.encode(raw))


def test_fresh_addresses_are_private_and_distinct() -> None:
    first, second = Addresses.fresh(replicas=2), Addresses.fresh()
    assert first.folder() != second.folder()
    every = (*first.schedulers, first.detokenizer, first.tokenizer)
    assert len(set(every)) == 4 and len(second.schedulers) == 1
    assert all(a.startswith("ipc://" + first.folder()) for a in every)
