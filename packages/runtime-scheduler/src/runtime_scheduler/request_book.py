"""The scheduler's books of its requests: who waits (by arrival), who runs (by admission), every
live request by id, and the ways a request leaves or steps back (finished, failed, outgrown,
retracted), each freeing what it holds and counting itself. The planner and the step's results
both move requests through these books; only this module changes them."""

from __future__ import annotations

import bisect

from runtime_scheduler.events import RequestEvent, event_of
from runtime_scheduler.kv_memory import KvMemory
from runtime_scheduler.metrics import Tally
from runtime_scheduler.request_state import RequestState
from runtime_scheduler.speculation import SpeculativeDecoding


class RequestBook:
    """Waiting and running requests over `memory`, counted in `tally`; `speculation` forgets a
    request that leaves or steps back (what it drafted for it is void)."""

    def __init__(self, memory: KvMemory, tally: Tally, speculation: SpeculativeDecoding | None) -> None:
        self.memory = memory
        self.tally = tally
        self.speculation = speculation
        self.waiting: list[RequestState] = []  # by arrival
        self.running: list[RequestState] = []  # by admission
        self.live: dict[str, RequestState] = {}

    def drop_stopped(self) -> None:
        """Take the requests that finished or failed out of the running list (retraction pops its own)."""
        self.running = [s for s in self.running if s.status == "running"]

    def drop_admitted(self) -> None:
        """Take the requests that left the queue (admitted, finished or failed) out of it."""
        self.waiting = [s for s in self.waiting if s.status == "waiting"]

    def end(self, s: RequestState) -> None:
        """`s` leaves the scheduler: it frees what it holds (its computed full pages stay cached)."""
        if s.status == "running":
            self.memory.release(s)
        s.status = "finished"
        del self.live[s.req.rid]
        self._forget(s)

    def finish(self, s: RequestState) -> None:
        self.end(s)
        self.tally.finished += 1

    def fail(self, s: RequestState, reason: str, events: list[RequestEvent]) -> None:
        """End a request that failed while being served: its pages are freed (its computed full
        pages stay cached), its client hears `reason`. The caller drops it from `running`."""
        self.end(s)
        self.tally.failed += 1
        events.append(event_of(s, "abort", error=reason))

    def finish_outgrown(self, s: RequestState, events: list[RequestEvent]) -> None:
        """End a request whose next token would need more KV than the whole pool: reason "length", no token."""
        self.finish(s)
        events.append(event_of(s, "length"))

    def retract(self, s: RequestState) -> None:
        """Send running `s` (already popped from `running`) back to the queue in arrival order,
        its pages freed (its computed prefix stays cached)."""
        self._forget(s)  # its pages may go to others: what a draft kept of it is void
        self.memory.release(s)
        s.status = "waiting"
        bisect.insort(self.waiting, s, key=lambda w: w.seq)
        self.tally.retractions += 1

    def _forget(self, s: RequestState) -> None:
        if self.speculation is not None:
            self.speculation.forget(s.req.rid)
