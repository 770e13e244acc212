"""The detokenizer process: publishes its bags, then turns the schedulers' token batches (one
scheduler per data-parallel replica) into text for the tokenizer manager, applying runtime
overrides on the way."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any

import zmq

import config_bags
from serve.child_process import Handover, die_with_parent, publish_received
from serve.config_override import apply_override
from serve.detokenizer.request_text import RequestText
from serve.ipc.channels import Addresses, Receiver, Sender
from serve.ipc.messages import (
    AbortRequest,
    EmbedResult,
    GenerateRequest,
    Message,
    OverrideAck,
    OverrideRequest,
    ProcessReady,
    SchedulerStats,
    TextBatch,
    TextOutput,
    TokenBatch,
)
from serve.process_names import DETOKENIZER
from serve.tokenizer.loading import load_tokenizer

logger = logging.getLogger(__name__)


class Detokenizer:
    """Routes messages: requests register text state, token batches become text batches."""

    def __init__(self, tokenizer: Any, to_tokenizer: Sender, to_schedulers: Sequence[Sender]) -> None:
        """`to_schedulers`: the pipe to each data-parallel replica's scheduler, by replica."""
        self._tokenizer = tokenizer
        self._to_tokenizer = to_tokenizer
        self._to_schedulers = tuple(to_schedulers)
        self._requests: dict[str, RequestText] = {}
        self._applied_override = 0  # the last override seq applied: every replica forwards each one

    def handle(self, message: Message) -> None:
        """Act on one message from a scheduler."""
        if isinstance(message, GenerateRequest):
            self._requests[message.rid] = RequestText(self._tokenizer, message)
        elif isinstance(message, TokenBatch):
            self._on_tokens(message)
        elif isinstance(message, OverrideRequest):
            if message.seq > self._applied_override:
                self._applied_override = message.seq
                self._to_tokenizer.send(apply_override(message, DETOKENIZER))
        elif isinstance(message, (OverrideAck, ProcessReady, SchedulerStats, EmbedResult)):
            self._to_tokenizer.send(message)
        else:
            logger.error("detokenizer got an unexpected %s", type(message).__name__)

    def _on_tokens(self, batch: TokenBatch) -> None:
        texts: list[TextOutput] = []
        for out in batch.outputs:
            state = self._requests.get(out.rid)
            if state is None:  # already finished by a stop string; the scheduler's echo is dropped
                continue
            text, stopped = state.advance(out)
            if text is not None:
                texts.append(text)
            if stopped:
                self._to_schedulers[state.replica].send(AbortRequest(rid=out.rid, reason="stop string matched"))
            if stopped or out.finish is not None:
                del self._requests[out.rid]
        if texts:
            self._to_tokenizer.send(TextBatch(outputs=tuple(texts)))


def run_detokenizer(handover: Handover, addresses: Addresses) -> None:
    """Entry point of the detokenizer process."""
    die_with_parent()
    publish_received(handover, "detokenizer")
    tokenizer = load_tokenizer()
    context: zmq.Context[Any] = zmq.Context()
    inbox = Receiver(context, addresses.detokenizer)
    to_schedulers = [Sender(context, address) for address in addresses.schedulers]
    detokenizer = Detokenizer(tokenizer, Sender(context, addresses.tokenizer), to_schedulers)
    config_bags.begin_serving()
    detokenizer.handle(
        ProcessReady(
            name=DETOKENIZER,
            role=config_bags.published_role(),
            pid=os.getpid(),
            config_hash=config_bags.config_hash(),
            role_check=config_bags.ROLE_CHECK_MODE.value,
        )
    )
    while True:
        inbox.poll(-1)
        for message in inbox.drain():
            detokenizer.handle(message)
