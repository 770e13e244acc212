"""The scheduler process's serving loop: take messages without blocking while there is work, run
one scheduler step, send its tokens to the detokenizer, apply overrides between steps.

With tensor parallelism a replica's ranks each run this loop in lockstep (serve.scheduler_process.
lockstep): the first rank takes the messages and shares them, every rank handles them and steps,
and only the first rank sends anything to the detokenizer.

A request that failed in the scheduler (its sampling raised, or its step's forward did: the
scheduler attributes it, see runtime_scheduler/executor.py) reaches the detokenizer as a delta
finishing with "abort" and `failure` naming the cause, and the loop serves on. An unrecoverable
fault (out of memory, a CUDA error) propagates out of `run_once`: the process ends and the
launcher fails every request in flight with a 503 and shuts the server down."""

from __future__ import annotations

import logging
import time

from runtime_scheduler import RequestEvent, Scheduler
from serve.config_override import apply_override
from serve.ipc.channels import Receiver, Sender
from serve.ipc.messages import (
    AbortRequest,
    GenerateRequest,
    Message,
    OverrideRequest,
    SchedulerStats,
    TokenBatch,
    TokenDelta,
    TokenLogprob,
)
from serve.scheduler_process.lockstep import Lockstep
from serve.scheduler_process.placement import ALONE, RankPlacement

logger = logging.getLogger(__name__)

_IDLE_POLL_MS = 500
_STATS_INTERVAL_S = 0.25


class _Tracked:
    """What the loop remembers of a live request to fill in its outputs."""

    __slots__ = ("logprobs", "prompt_tokens")

    def __init__(self, prompt_tokens: int, logprobs: bool) -> None:
        self.prompt_tokens = prompt_tokens
        self.logprobs = logprobs


class SchedulerLoop:
    """Routes messages into the scheduler and its events out to the detokenizer."""

    def __init__(
        self,
        scheduler: Scheduler,
        inbox: Receiver | None,
        to_detokenizer: Sender | None,
        *,
        lockstep: Lockstep | None = None,
        placement: RankPlacement = ALONE,
    ) -> None:
        """A replica's first rank (`lockstep.leads`) has the `inbox` and the pipe `to_detokenizer`;
        its other ranks have neither and get every message through `lockstep`."""
        self._lockstep = lockstep or Lockstep.alone()
        if (inbox is not None and to_detokenizer is not None) != self._lockstep.leads:
            raise ValueError(
                "a replica's first rank takes an inbox and a pipe to the detokenizer, and its other ranks neither"
            )
        self._scheduler = scheduler
        self._inbox = inbox
        self._out = to_detokenizer
        self._placement = placement
        self._live: dict[str, _Tracked] = {}
        self._last_stats = 0.0

    def run_forever(self) -> None:
        """Serve until the process is terminated."""
        while True:
            self.run_once()

    def run_once(self) -> None:
        """One iteration: messages (waiting only when idle; shared with the replica's other
        ranks), then one step if there is work."""
        drained: list[Message] = []
        if self._inbox is not None and self._inbox.poll(0 if self._scheduler.has_work() else _IDLE_POLL_MS):
            drained = self._inbox.drain()
        for message in self._lockstep.share(drained):
            self.handle(message)
        if self._scheduler.has_work():
            events = self._scheduler.step()
            if events and self._out is not None:
                self._out.send(TokenBatch(outputs=tuple(self._deltas(events))))
        now = time.monotonic()
        if self._out is not None and now - self._last_stats >= _STATS_INTERVAL_S:
            self._last_stats = now
            self._out.send(SchedulerStats(metrics=self._scheduler.metrics(), replica=self._placement.replica))

    def _send(self, message: Message) -> None:
        """To the detokenizer, from the replica's first rank (the others' scheduler is its twin)."""
        if self._out is not None:
            self._out.send(message)

    def handle(self, message: Message) -> None:
        """Act on one message, between steps."""
        if isinstance(message, GenerateRequest):
            self._send(message)  # the detokenizer registers it before any of its tokens arrive
            refusal = self._scheduler.add_request(message.request)
            if refusal is not None:
                self._send(
                    TokenBatch(outputs=(TokenDelta(rid=refusal.rid, new_ids=(), finish="abort", error=refusal.reason),))
                )
                return
            request = message.request
            if self._out is not None:
                self._live[request.rid] = _Tracked(len(request.prompt_ids), request.sampling.logprobs)
        elif isinstance(message, AbortRequest):
            if self._scheduler.abort(message.rid):
                self._live.pop(message.rid, None)
                self._send(TokenBatch(outputs=(TokenDelta(rid=message.rid, new_ids=(), finish="abort"),)))
                logger.debug("aborted %s: %s", message.rid, message.reason)
        elif isinstance(message, OverrideRequest):
            # Every rank applies it at this point of the same message order, and acknowledges itself.
            ack = apply_override(message, self._placement.name)
            for each in self._lockstep.gather(ack):
                self._send(each)
            self._send(message)  # the detokenizer applies it next and acknowledges for itself
        else:
            logger.error("scheduler got an unexpected %s", type(message).__name__)

    def _deltas(self, events: list[RequestEvent]) -> list[TokenDelta]:
        deltas: list[TokenDelta] = []
        for event in events:
            tracked = self._live.get(event.rid)
            if tracked is None:
                continue
            token = () if event.token_id is None else (event.token_id,)
            wants = tracked.logprobs and event.token_id is not None
            if event.finish_reason is not None:
                del self._live[event.rid]
            if event.error is not None:
                logger.warning("request %s failed: %s", event.rid, event.error)
            deltas.append(
                TokenDelta(
                    rid=event.rid,
                    new_ids=token,
                    finish=event.finish_reason,
                    matched_stop=event.token_id if event.finish_reason == "stop" else None,
                    prompt_tokens=tracked.prompt_tokens,
                    cached_tokens=event.cached_tokens,
                    logprobs=(TokenLogprob(event.token_id, event.logprob or 0.0),)
                    if wants and event.token_id is not None
                    else (),
                    top_logprobs=(tuple(TokenLogprob(t, lp) for t, lp in event.top_logprobs or ()),) if wants else (),
                    failure=event.error,
                )
            )
        return deltas
