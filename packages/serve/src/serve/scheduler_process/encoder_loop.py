"""The scheduler process of a launch whose task is embed or rerank: an encoder (or cross-encoder,
or a decoder embedding) and a loop that batches the pending inputs into one forward.

An embedding input needs none of the scheduler's machinery (runtime_scheduler is a KV-page
machine: admission by free pages, a prefix cache, chunked prefill, retraction, decode steps and
sampling over requests that live across steps): one forward gives its vector and it is done. So
the loop takes every message that arrived, embeds the waiting requests' inputs together (whole
requests, in arrival order, up to schedule.max_prefill_tokens tokens, at least one request, read
at each step), and answers each request with its outputs (vectors, or scores). The encoder is
batch-invariant (runtime_runner.models.encoder), so whatever a request is batched with, its
outputs are the same; so is a decoder's (runtime_runner.models.decoder_embedder).
"""

from __future__ import annotations

import logging
import os
from collections import deque
from pathlib import Path
from typing import Any

import torch
import zmq

import config_bags
from config_bags.server import get_model, get_schedule
from runtime_runner.errors import BatchError
from serve.config_override import apply_override
from serve.ipc.channels import Addresses, Receiver, Sender
from serve.ipc.messages import (
    AbortRequest,
    EmbedRequest,
    EmbedResult,
    Message,
    OverrideRequest,
    ProcessReady,
)
from serve.scheduler_process.embedding_model import Compute, load_embedding_model
from serve.scheduler_process.placement import RankPlacement

logger = logging.getLogger(__name__)

_IDLE_POLL_MS = 500


class EncoderLoop:
    """Routes encoder requests into batched forwards and their outputs out."""

    def __init__(self, compute: Compute, inbox: Receiver, out: Sender, name: str) -> None:
        self._compute = compute
        self._inbox = inbox
        self._out = out
        self._name = name
        self._waiting: deque[EmbedRequest] = deque()

    def run_forever(self) -> None:
        """Serve until the process is terminated."""
        while True:
            self.run_once()

    def run_once(self) -> None:
        """Take the messages that arrived (waiting only when idle), then embed one batch."""
        if self._inbox.poll(0 if self._waiting else _IDLE_POLL_MS):
            for message in self._inbox.drain():
                self.handle(message)
        if self._waiting:
            self._embed(self._next_batch())

    def handle(self, message: Message) -> None:
        """Act on one message, between forwards."""
        if isinstance(message, EmbedRequest):
            self._waiting.append(message)
        elif isinstance(message, AbortRequest):
            self._waiting = deque(r for r in self._waiting if r.rid != message.rid)
        elif isinstance(message, OverrideRequest):
            self._out.send(apply_override(message, self._name))
            self._out.send(message)  # the detokenizer applies it next and acknowledges for itself
        else:
            logger.error("encoder got an unexpected %s", type(message).__name__)

    def _next_batch(self) -> list[EmbedRequest]:
        budget = get_schedule().max_prefill_tokens
        batch = [self._waiting.popleft()]
        tokens = sum(len(ids) for ids in batch[0].inputs)
        while self._waiting:
            more = sum(len(ids) for ids in self._waiting[0].inputs)
            if tokens + more > budget:
                break
            batch.append(self._waiting.popleft())
            tokens += more
        return batch

    def _embed(self, batch: list[EmbedRequest]) -> None:
        inputs = [ids for request in batch for ids in request.inputs]
        types = [t for request in batch for t in request.token_types]
        try:
            outputs = self._compute(inputs, types)
        except BatchError as err:
            # The API checks every input first; one that got here anyway fails its batch, not the process.
            for request in batch:
                self._out.send(EmbedResult(rid=request.rid, error=str(err)))
            return
        at = 0
        for request in batch:
            mine = outputs[at : at + len(request.inputs)]
            at += len(request.inputs)
            self._out.send(EmbedResult(rid=request.rid, vectors=tuple(mine)))


def run_encoder(addresses: Addresses, placement: RankPlacement) -> None:
    """The rest of a scheduler process serving task embed or rerank (published, alone:
    task_served refuses replicas and tensor parallelism): load the encoder, report ready, serve."""
    context: zmq.Context[Any] = zmq.Context()
    inbox = Receiver(context, addresses.schedulers[placement.replica])
    to_detokenizer = Sender(context, addresses.detokenizer)
    model_bag = get_model()
    if model_bag.model_path is None:
        raise RuntimeError("model.model_path is unset; the launcher resolves it before starting the scheduler")
    logger.info("loading the encoder")
    path = Path(model_bag.model_path)
    model = load_embedding_model(path)
    config_bags.begin_serving()
    logger.info("encoder loaded: %s; torch threads: %d", model.info, torch.get_num_threads())
    to_detokenizer.send(
        ProcessReady(
            name=placement.name,
            role=config_bags.published_role(),
            pid=os.getpid(),
            config_hash=config_bags.config_hash(),
            role_check=config_bags.ROLE_CHECK_MODE.value,
            model=model.info,
        )
    )
    EncoderLoop(model.compute, inbox, to_detokenizer, placement.name).run_forever()
