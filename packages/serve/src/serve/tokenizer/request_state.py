"""One in-flight request as the tokenizer manager tracks it: its output queue and its timings."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from serve.ipc.messages import TextOutput


class ServerFaultError(RuntimeError):
    """The server cannot finish the request (a process died); answered with a 5xx."""


class RequestRefusedError(ServerFaultError):
    """The scheduler refused the request (its waiting queue is full); answered with a 503."""


class RequestFailedError(ServerFaultError):
    """Serving this request raised (its sampling, its step's forward, or sending it to the
    scheduler); it failed alone and the server goes on. Answered with a 500."""


@dataclass
class RequestState:
    """Outputs waiting for the HTTP handler, and when the request arrived and last produced."""

    queue: asyncio.Queue[TextOutput | ServerFaultError] = field(default_factory=asyncio.Queue)
    arrival: float = field(default_factory=time.monotonic)
    last_output: float | None = None
