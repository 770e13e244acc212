"""Continuous batching: each step plans (admits, chunks, decodes, retracts: step_planner.py), runs
one forward, and applies its answer (step_results.py); the requests' books are request_book.py.

The serving loop calls `add_request`, `abort` and `step` from one thread. `step` never waits for
anything but the forward it runs; with nothing to do it returns at once, except that with nothing
to run but queued requests whose grammar is compiling it waits up to 2 ms for one (rather than
have the loop spin against the compiling thread). Every schedule leaf
(page_size, chunked_prefill_size, max_running_requests, max_prefill_tokens, schedule_policy,
max_queued_requests) and the context length are read from the published bags at each decision,
so an override takes effect on the next step.

Speculative decoding (speculation.py): with a speculator, a step that has no prompt work offers
its decoding requests drafts (as many as spec's draft budget, the request's remaining tokens, the
context and the pool allow, read at the step) and runs them in one target_verify forward; each
request keeps the drafts the speculator accepts plus the target's next token, and gives back the
pages of the rest. A step with prompt work decodes plainly (prefill and verify never share a
forward), so chunked prefill, the prefix cache and retraction work as without speculation.

One request never takes the others down (executor.py says how a failure is attributed): a request
the executor reports failed, or every request of a step whose forward raised, finishes with reason
"abort" and an error event, its pages freed, and the scheduler serves the rest; only an
unrecoverable fault propagates out of `step`.

Output constraints (grammar.py): a constrained request waits in the queue until its matcher has
compiled, samples only what its matcher allows, and finishes "stop" when its grammar terminates.
"""

from __future__ import annotations

import msgspec

from config_bags.server import context_length_of, get_model, get_schedule
from runtime_scheduler.admission import refusal_reason
from runtime_scheduler.audit import audit_pages
from runtime_scheduler.batch_assembly import forward_batch_of
from runtime_scheduler.events import Refusal, RequestEvent
from runtime_scheduler.executor import ForwardOutputView, ModelExecutor, check_answer, is_unrecoverable
from runtime_scheduler.grammar import GrammarEngine
from runtime_scheduler.kv_memory import KvMemory
from runtime_scheduler.metrics import SchedulerMetrics, Tally
from runtime_scheduler.request import Request
from runtime_scheduler.request_book import RequestBook
from runtime_scheduler.request_state import RequestState
from runtime_scheduler.speculation import Speculator, check_verify_answer, speculative_decoding_of
from runtime_scheduler.step_planner import StepPlan, StepPlanner
from runtime_scheduler.step_results import apply_forward, apply_verify


class Scheduler:
    """Requests in, one forward per step, per-request events out.

    `max_total_tokens` is the slot count of the pool the executor built (the runner's
    `pool.num_slots`, sized by `max_total_tokens_of`): a fact of that pool, passed in, not a copy
    of a leaf that an override could leave behind. `model_max_length` is the
    model's own maximum sequence length; the served context length is derived from it and the
    published `model.context_length` at each decision. Build it after publish: the pool has
    `max_total_tokens // page_size` pages, and page_size is cold. `speculator` is required exactly
    when spec.speculative_algorithm is set (a cold leaf). `state_slots` is the slot count of a
    hybrid model's recurrent-state pool (the runner's, like `max_total_tokens`; 0 for a model
    without one): each running request holds one, and admission waits for a free one.
    `snapshot_slots` is the slot count of such a runner's snapshot pool: its requests resume after
    a cached prefix where a snapshot was kept (state_snapshots.py), none without. `grammars` compiles the output
    constraints of requests that carry one; without it such a request is refused.
    """

    def __init__(
        self,
        executor: ModelExecutor,
        *,
        model_max_length: int,
        max_total_tokens: int,
        speculator: Speculator | None = None,
        state_slots: int = 0,
        snapshot_slots: int = 0,
        grammars: GrammarEngine | None = None,
    ) -> None:
        if model_max_length < 1:
            raise ValueError(f"model_max_length={model_max_length} is not accepted; accepted: an int >= 1")
        self._executor = executor
        self._model_max_length = model_max_length
        self._memory = KvMemory(max_total_tokens, state_slots=state_slots, snapshot_slots=snapshot_slots)
        self._speculation = speculative_decoding_of(speculator, self._memory)
        self._book = RequestBook(self._memory, Tally(), self._speculation)
        self._planner = StepPlanner(self._book)
        self._next_seq = 0
        self._grammars = grammars

    @property
    def _running(self) -> list[RequestState]:
        return self._book.running

    @property
    def _waiting(self) -> list[RequestState]:
        return self._book.waiting

    # ---- the server's API -------------------------------------------------------------------

    def add_request(self, req: Request) -> Refusal | None:
        """Queue `req`; a Refusal (with the reason) when it can never run or the queue is full.

        A request whose rid is already waiting or running is a caller error (ValueError).
        """
        if not isinstance(req, Request):
            raise TypeError(f"add_request() takes a runtime_scheduler.Request, got {type(req).__name__}")
        if req.rid in self._book.live:
            raise ValueError(f"request id {req.rid!r} is already waiting or running; accepted: an id not in use")
        schedule = get_schedule()
        pool_tokens = self._memory.allocator.num_pages * schedule.page_size
        context = self._context_length()
        reason = refusal_reason(req, context, pool_tokens, len(self._book.waiting), schedule.max_queued_requests)
        if reason is None and req.sampling.constraint is not None and self._grammars is None:
            reason = "this server constrains no output (no grammar engine: --grammar-backend none); send no constraint"
        if reason is not None:
            return Refusal(rid=req.rid, reason=reason)
        state = RequestState(req, self._next_seq)
        if req.sampling.constraint is not None and self._grammars is not None:
            state.grammar_pending = self._grammars.matcher_for(req.sampling.constraint)
        self._next_seq += 1
        self._book.waiting.append(state)
        self._book.live[req.rid] = state
        return None

    def abort(self, rid: str) -> bool:
        """Drop request `rid` and free everything it holds (its computed prefix stays cached).
        Whether it was live; an unknown or finished rid changes nothing."""
        self._memory.check_page_size()
        state = self._book.live.get(rid)
        if state is None:
            return False
        (self._book.running if state.status == "running" else self._book.waiting).remove(state)
        self._book.end(state)
        self._book.tally.aborted += 1
        return True

    def has_work(self) -> bool:
        """Whether any request is waiting or running."""
        return bool(self._book.waiting or self._book.running)

    def step(self) -> list[RequestEvent]:
        """Plan one batch, run it through the executor, and apply what it answered per request.

        A request the executor reports failed finishes with an error event, alone. An exception
        from the executor (or an answer of the wrong shape) fails every request of the step, each
        with an error event naming the cause. An unrecoverable fault (`is_unrecoverable`) instead
        propagates after the step's page allocations are undone, every request standing where it
        stood before the step.
        """
        self._memory.check_page_size()
        events: list[RequestEvent] = []
        plan = self._planner.plan(events)
        if plan is not None:
            try:
                drafts, output = self._run(plan)
            except BaseException as err:
                self._fail_step(plan, err, events)
            else:
                self._apply(plan, drafts, output, events)
            self._book.drop_stopped()
        return events

    def flush_cache(self) -> int:
        """Evict every cached page that no running request uses; how many pages were freed."""
        return self._memory.flush()

    def metrics(self) -> SchedulerMetrics:
        """A snapshot of queue sizes, pool usage, cache hits and retractions."""
        book = self._book
        metrics = book.tally.snapshot(self._memory, running=len(book.running), waiting=len(book.waiting))
        if self._grammars is not None:
            counts = self._grammars.counts()
            metrics = msgspec.structs.replace(
                metrics,
                num_grammar_waiting=sum(s.grammar_pending is not None for s in book.waiting),
                grammar_compiles=counts.compiles,
                grammar_cache_hits=counts.cache_hits,
                grammar_compile_seconds=counts.compile_seconds,
            )
        return metrics if self._speculation is None else self._speculation.counted_in(metrics)

    def audit(self) -> None:
        """Check every page's ownership and the cache's locks (a full walk; for tests and debugging)."""
        audit_pages(self._memory, self._book.running, self._book.waiting)

    # ---- the step ---------------------------------------------------------------------------

    def _context_length(self) -> int:
        """The served context length now: the published model.context_length within the model's own."""
        return context_length_of(get_model(), self._model_max_length)

    def _run(self, plan: StepPlan) -> tuple[list[list[int]] | None, ForwardOutputView]:
        """The plan's forward (a verify of drafts when only decodes run and speculation offers
        some), its answer checked for shape."""
        drafts = None
        if plan.decodes and not plan.extends and self._speculation is not None:
            drafts = self._speculation.drafts_for(plan.decodes, self._context_length())
        batch = forward_batch_of(plan.extends, plan.decodes, drafts)
        output = self._executor.forward(batch)
        check_answer(output, len(batch.requests))
        if drafts is not None:
            check_verify_answer(output.verified, drafts)
        return drafts, output

    def _apply(
        self, plan: StepPlan, drafts: list[list[int]] | None, output: ForwardOutputView, events: list[RequestEvent]
    ) -> None:
        if drafts is not None:
            apply_verify(self._book, plan.decodes, drafts, output, self._context_length(), events)
        else:
            apply_forward(self._book, plan, output, self._context_length(), events)

    def _fail_step(self, plan: StepPlan, err: BaseException, events: list[RequestEvent]) -> None:
        """Every request of the step fails with `err`; an unrecoverable one propagates instead,
        after the step's pages are given back (nothing was computed: the requests stand exactly
        where they stood, and the audit passes, while the process ends)."""
        if is_unrecoverable(err):
            for s in plan.requests():
                self._memory.shrink_to_computed(s)
            raise err
        reason = f"request failed: the model forward of its step raised {type(err).__name__}: {err}"
        for s in plan.requests():
            self._book.fail(s, reason, events)
