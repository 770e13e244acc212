"""The tokenizer manager: the main process's side of the pipes.

HTTP handlers hand it tokenized requests and iterate the outputs; it sends each to the scheduler
of the data-parallel replica its router picks (serve.tokenizer.router). One receive task routes
the detokenizer's messages to per-request queues, to the metrics, and to a pending runtime
override, which every child process (every rank of every replica, and the detokenizer) must
acknowledge with one config hash.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import AsyncGenerator, Mapping
from typing import Any

import msgspec
import zmq.asyncio

import config_bags
from config_bags.server import get_observability
from serve.config_override import check_runtime_override
from serve.ipc.channels import Addresses, AsyncReceiver, AsyncSender
from serve.ipc.messages import (
    AbortRequest,
    EmbedRequest,
    EmbedResult,
    GenerateRequest,
    Message,
    ModelInfo,
    OverrideAck,
    OverrideRequest,
    ProcessReady,
    SchedulerStats,
    TextBatch,
    TextOutput,
)
from serve.metrics.server_metrics import ServerMetrics
from serve.process_names import child_process_names
from serve.tokenizer.request_state import RequestFailedError, RequestRefusedError, RequestState, ServerFaultError
from serve.tokenizer.router import ReplicaRouter

logger = logging.getLogger(__name__)

_OVERRIDE_TIMEOUT_S = 60.0


class OverrideFailedError(RuntimeError):
    """A validated override that a process refused or did not acknowledge in time."""


class TokenizerManager:
    """Sends requests to the replicas' schedulers and routes every message coming back."""

    def __init__(self, eos_token_ids: tuple[int, ...], addresses: Addresses) -> None:
        self.eos_token_ids = eos_token_ids  # the served tokenizer's and generation config's, fixed by the checkpoint
        self._context = zmq.asyncio.Context()
        self._to_schedulers = tuple(AsyncSender(self._context, address) for address in addresses.schedulers)
        self._inbox = AsyncReceiver(self._context, addresses.tokenizer)
        self.metrics = ServerMetrics()
        self.router = ReplicaRouter()
        self._requests: dict[str, RequestState] = {}
        self._embeddings: dict[str, asyncio.Future[EmbedResult]] = {}
        # Each child process by name (serve.process_names): its config hash, pid, role and role-check mode.
        self.process_hashes: dict[str, str] = {}
        self.process_pids: dict[str, int] = {}
        self.process_roles: dict[str, str] = {}
        self.process_role_checks: dict[str, str] = {}
        self._model_info: ModelInfo | None = None
        self.all_ready = asyncio.Event()
        self.fault: str | None = None
        self._override_lock = asyncio.Lock()
        self._override_seq = itertools.count(1)
        self._override_pending: tuple[int, asyncio.Future[list[OverrideAck]], list[OverrideAck]] | None = None

    def close(self) -> None:
        """Close the pipes (an open ZMQ context would hold the process at exit)."""
        self._context.destroy(linger=0)

    @property
    def model_info(self) -> ModelInfo:
        """The model limits a scheduler reported (every replica's are the same; available once one is ready)."""
        if self._model_info is None:
            raise RuntimeError("model_info was read before the scheduler reported ready")
        return self._model_info

    @property
    def healthy(self) -> bool:
        """Whether every process is up and none has died."""
        return self.fault is None and self.all_ready.is_set()

    async def receive_forever(self) -> None:
        """Route every incoming message (runs as one task for the life of the server)."""
        while True:
            self._route(await self._inbox.receive())

    def _route(self, message: Message) -> None:
        if isinstance(message, TextBatch):
            now = time.monotonic()
            for out in message.outputs:
                self._deliver(out, now)
        elif isinstance(message, EmbedResult):
            waiting = self._embeddings.pop(message.rid, None)
            if waiting is not None and not waiting.done():
                waiting.set_result(message)
        elif isinstance(message, SchedulerStats):
            self.metrics.replicas[message.replica] = message.metrics
        elif isinstance(message, OverrideAck):
            self._on_ack(message)
        elif isinstance(message, ProcessReady):
            self.process_hashes[message.name] = message.config_hash
            self.process_pids[message.name] = message.pid
            self.process_roles[message.name] = message.role
            self.process_role_checks[message.name] = message.role_check
            if message.model is not None:
                self._model_info = message.model
            logger.info("%s ready (pid %d, config hash %s)", message.name, message.pid, message.config_hash)
            if all(name in self.process_hashes for name in child_process_names()):
                self.all_ready.set()
        else:
            logger.error("tokenizer manager got an unexpected %s", type(message).__name__)

    def _deliver(self, out: TextOutput, now: float) -> None:
        state = self._requests.get(out.rid)
        if state is None:
            return
        tokens = len(out.new_ids)
        if tokens:
            self.router.produced(out.rid, tokens)
            self.metrics.tokens_generated(tokens, now)
            if state.last_output is None:
                self.metrics.ttft.observe(now - state.arrival)
            else:
                for _ in range(tokens):
                    self.metrics.itl.observe((now - state.last_output) / tokens)
            state.last_output = now
        if out.finish is not None:
            if get_observability().log_requests:
                logger.info("request %s finished (%s) after %d tokens", out.rid, out.finish, out.completion_tokens)
            del self._requests[out.rid]
            self.router.finished(out.rid)
            self.metrics.requests_finished += 1
            if out.failure is not None:
                self.metrics.requests_failed += 1
            self.metrics.prompt_tokens += out.prompt_tokens
            self.metrics.e2e.observe(now - state.arrival)
        state.queue.put_nowait(out)

    async def generate(self, request: GenerateRequest) -> AsyncGenerator[TextOutput, None]:
        """Send `request` to the replica the router picks and yield its outputs until the one that
        finishes it. Leaving early (the client went away) aborts the request so the scheduler
        frees its pages. A request that cannot be sent, or that failed in the scheduler, raises
        RequestFailedError and leaves nothing registered."""
        if self.fault is not None:
            raise ServerFaultError(self.fault)
        if request.rid in self._requests:
            raise ValueError(f"request id {request.rid!r} is already in flight; ids must be unique")
        replica = self.router.route(request.rid, request.request.prompt_ids, request.request.stop.max_new_tokens)
        request = msgspec.structs.replace(request, replica=replica)
        state = RequestState()
        self._requests[request.rid] = state
        if get_observability().log_requests:
            logger.info(
                "request %s: prompt %s, %s (replica %d)",
                request.rid,
                list(request.request.prompt_ids),
                request.request.sampling,
                replica,
            )
        try:
            self._to_schedulers[replica].send(request)
        except Exception as err:
            # Nothing reached the scheduler (the encoding failed first), so there is nothing to abort.
            del self._requests[request.rid]
            self.router.finished(request.rid)
            self.metrics.requests_failed += 1
            raise RequestFailedError(
                f"the request could not be sent to the scheduler: {type(err).__name__}: {err}"
            ) from err
        try:
            while True:
                item = await state.queue.get()
                if isinstance(item, ServerFaultError):
                    raise item
                if item.error is not None:
                    raise RequestRefusedError(item.error)
                if item.failure is not None:
                    raise RequestFailedError(item.failure)
                yield item
                if item.finish is not None:
                    return
        finally:
            if self._requests.pop(request.rid, None) is not None:
                self.router.finished(request.rid)
                self.metrics.requests_aborted += 1
                if self.fault is None:
                    self._to_schedulers[replica].send(AbortRequest(rid=request.rid, reason="client disconnected"))

    async def embed(
        self, rid: str, inputs: tuple[tuple[int, ...], ...], token_types: tuple[tuple[int, ...], ...] = ()
    ) -> tuple[bytes, ...]:
        """The encoder's output for each of `inputs` (token ids, checked by the caller; in segments
        `token_types` for a cross-encoder's pairs), each its float32 bytes.
        A request the encoder failed raises RequestFailedError; leaving early (the client went
        away) drops the request from the encoder's queue."""
        if self.fault is not None:
            raise ServerFaultError(self.fault)
        done: asyncio.Future[EmbedResult] = asyncio.get_running_loop().create_future()
        self._embeddings[rid] = done
        tokens = sum(len(ids) for ids in inputs)
        self.metrics.embedding_requests += 1
        self.metrics.embedding_inputs += len(inputs)
        self.metrics.embedding_tokens += tokens
        try:
            self._to_schedulers[0].send(EmbedRequest(rid=rid, inputs=inputs, token_types=token_types))
            result = await done
        finally:
            if self._embeddings.pop(rid, None) is not None and self.fault is None:
                self._to_schedulers[0].send(AbortRequest(rid=rid, reason="client disconnected"))
        if result.error is not None:
            raise RequestFailedError(result.error)
        return result.vectors

    def fail_all(self, reason: str) -> None:
        """A process died: every in-flight request and a pending override end with `reason`."""
        self.fault = reason
        for state in self._requests.values():
            state.queue.put_nowait(ServerFaultError(reason))
        for waiting in self._embeddings.values():
            if not waiting.done():
                waiting.set_exception(ServerFaultError(reason))
        if self._override_pending is not None and not self._override_pending[1].done():
            self._override_pending[1].set_exception(OverrideFailedError(reason))

    async def override(self, leaves: Mapping[str, Any], source: str) -> str:
        """Check `leaves` as a serving process would, apply them in every process (every rank of
        every replica between steps, the detokenizer after), and return the config hash once all
        processes acknowledged it."""
        check_runtime_override(leaves)
        if self.fault is not None:
            raise OverrideFailedError(self.fault)
        async with self._override_lock:
            seq = next(self._override_seq)
            done: asyncio.Future[list[OverrideAck]] = asyncio.get_running_loop().create_future()
            self._override_pending = (seq, done, [])
            for to_scheduler in self._to_schedulers:
                to_scheduler.send(OverrideRequest(seq=seq, source=source, leaves=dict(leaves)))
            try:
                acks = await asyncio.wait_for(done, _OVERRIDE_TIMEOUT_S)
            except TimeoutError:
                raise OverrideFailedError(
                    f"processes did not acknowledge the override within {_OVERRIDE_TIMEOUT_S:.0f} s"
                ) from None
            finally:
                self._override_pending = None
            refused = [f"{ack.process}: {ack.error}" for ack in acks if ack.error is not None]
            if refused:
                raise OverrideFailedError("override refused by " + "; ".join(refused))
            config_bags.override(source, **leaves)
            for ack in acks:
                self.process_hashes[ack.process] = ack.config_hash
            mine = config_bags.config_hash()
            disagree = {name: h for name, h in self.process_hashes.items() if h != mine}
            if disagree:
                raise OverrideFailedError(f"processes disagree after the override: main {mine}, {disagree}")
            return mine

    def _on_ack(self, ack: OverrideAck) -> None:
        pending = self._override_pending
        if pending is None or pending[0] != ack.seq or pending[1].done():
            logger.warning("override ack for seq %d arrived with no override pending", ack.seq)
            return
        pending[2].append(ack)
        if {a.process for a in pending[2]} >= set(child_process_names()):
            pending[1].set_result(list(pending[2]))
