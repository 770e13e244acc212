"""Continuous batching: each step admits, chunks, decodes and retracts, then runs one forward.

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

import bisect
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, wait

import msgspec

from config_bags.server import chunk_size_of, context_length_of, get_model, get_schedule
from runtime_scheduler.admission import admission_order, extend_len_of, refusal_reason
from runtime_scheduler.audit import audit_pages
from runtime_scheduler.batch_assembly import Extend, forward_batch_of
from runtime_scheduler.events import Refusal, RequestEvent, event_of
from runtime_scheduler.executor import ForwardOutputView, ModelExecutor, check_answer, is_unrecoverable
from runtime_scheduler.grammar import GrammarEngine
from runtime_scheduler.kv_memory import KvMemory, pages_for
from runtime_scheduler.metrics import SchedulerMetrics, Tally
from runtime_scheduler.request import FinishReason, Request
from runtime_scheduler.request_state import RequestState
from runtime_scheduler.speculation import Speculator, check_verify_answer, speculative_decoding_of
from runtime_scheduler.stop import finish_reason_of

_GRAMMAR_WAIT_S = 0.002  # the longest an idle step waits for a grammar to compile


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
        self._waiting: list[RequestState] = []  # by arrival
        self._running: list[RequestState] = []  # by admission
        self._live: dict[str, RequestState] = {}
        self._next_seq = 0
        self._tally = Tally()
        self._grammars = grammars

    # ---- the server's API -------------------------------------------------------------------

    def add_request(self, req: Request) -> Refusal | None:
        """Queue `req`; a Refusal (with the reason) when it can never run or the queue is full.

        A request whose rid is already waiting or running is a caller error (ValueError).
        """
        if not isinstance(req, Request):
            raise TypeError(f"add_request() takes a runtime_scheduler.Request, got {type(req).__name__}")
        if req.rid in self._live:
            raise ValueError(f"request id {req.rid!r} is already waiting or running; accepted: an id not in use")
        schedule = get_schedule()
        pool_tokens = self._memory.allocator.num_pages * schedule.page_size
        context = self._context_length()
        reason = refusal_reason(req, context, pool_tokens, len(self._waiting), schedule.max_queued_requests)
        if reason is None and req.sampling.constraint is not None and self._grammars is None:
            reason = "this server constrains no output (no grammar engine: --grammar-backend none); send no constraint"
        if reason is not None:
            return Refusal(rid=req.rid, reason=reason)
        state = RequestState(req, self._next_seq)
        if req.sampling.constraint is not None and self._grammars is not None:
            state.grammar_pending = self._grammars.matcher_for(req.sampling.constraint)
        self._next_seq += 1
        self._waiting.append(state)
        self._live[req.rid] = state
        return None

    def abort(self, rid: str) -> bool:
        """Drop request `rid` and free everything it holds (its computed prefix stays cached).
        Whether it was live; an unknown or finished rid changes nothing."""
        self._memory.check_page_size()
        state = self._live.get(rid)
        if state is None:
            return False
        (self._running if state.status == "running" else self._waiting).remove(state)
        self._end(state)
        self._tally.aborted += 1
        return True

    def has_work(self) -> bool:
        """Whether any request is waiting or running."""
        return bool(self._waiting or self._running)

    def step(self) -> list[RequestEvent]:
        """Plan one batch, run it through the executor, and report what happened per request.

        A request the executor reports failed finishes with an error event, alone. An exception
        from the executor (or an answer of the wrong shape) fails every request of the step, each
        with an error event naming the cause. An unrecoverable fault (`is_unrecoverable`) instead
        propagates after the step's page allocations are undone, every request standing where it
        stood before the step.
        """
        self._memory.check_page_size()
        events: list[RequestEvent] = []
        decodes, prefilling, retracted = self._plan_decodes(events)
        extends = [] if retracted else self._plan_extends(prefilling, events, admit=True)
        while not extends and not decodes and len(self._running) > 1:
            # Prefills that each wait for pages the others hold: the newest steps back.
            self._retract(self._running.pop())
            prefilling = [s for s in self._running if s.kv_len < s.fill_len - 1]
            extends = self._plan_extends(prefilling, events, admit=False)
        if not extends and not decodes:
            self._await_grammars()
            return events
        drafts: list[list[int]] | None = None
        try:
            if decodes and not extends and self._speculation is not None:
                drafts = self._speculation.drafts_for(decodes, self._context_length())
            batch = forward_batch_of(extends, decodes, drafts)
            output = self._executor.forward(batch)
            check_answer(output, len(batch.requests))
            if drafts is not None:
                check_verify_answer(output.verified, drafts)
        except BaseException as err:
            stepped = [s for s, _ in extends] + decodes
            if is_unrecoverable(err):
                # Nothing was computed: give back the pages planned for this step, so the requests
                # stand exactly where they stood (the audit passes) while the process ends.
                for s in stepped:
                    self._memory.shrink_to_computed(s)
                raise
            reason = f"request failed: the model forward of its step raised {type(err).__name__}: {err}"
            for s in stepped:
                self._fail(s, reason, events)
        else:
            if drafts is not None:
                self._absorb_verify(decodes, drafts, output, events)
            else:
                self._absorb(extends, decodes, output, events)
        self._drop_stopped()
        return events

    def flush_cache(self) -> int:
        """Evict every cached page that no running request uses; how many pages were freed."""
        return self._memory.flush()

    def metrics(self) -> SchedulerMetrics:
        """A snapshot of queue sizes, pool usage, cache hits and retractions."""
        metrics = self._tally.snapshot(self._memory, running=len(self._running), waiting=len(self._waiting))
        if self._grammars is not None:
            counts = self._grammars.counts()
            metrics = msgspec.structs.replace(
                metrics,
                num_grammar_waiting=sum(s.grammar_pending is not None for s in self._waiting),
                grammar_compiles=counts.compiles,
                grammar_cache_hits=counts.cache_hits,
                grammar_compile_seconds=counts.compile_seconds,
            )
        return metrics if self._speculation is None else self._speculation.counted_in(metrics)

    def audit(self) -> None:
        """Check every page's ownership and the cache's locks (a full walk; for tests and debugging)."""
        audit_pages(self._memory, self._running, self._waiting)

    # ---- planning ---------------------------------------------------------------------------

    def _context_length(self) -> int:
        """The served context length now: the published model.context_length within the model's own."""
        return context_length_of(get_model(), self._model_max_length)

    def _plan_decodes(self, events: list[RequestEvent]) -> tuple[list[RequestState], list[RequestState], bool]:
        """The running requests that decode this step, each with a page for its new token; the
        running requests still prefilling; whether any request was retracted.

        A request whose next token would need more than the whole pool finishes with reason
        "length". When the pool cannot supply the other decodes' pages even after evicting the
        cache, the most recently admitted requests go back to waiting (their computed prefix
        stays cached).
        """
        page_size = get_schedule().page_size
        num_pages = self._memory.allocator.num_pages
        decodes: list[RequestState] = []
        prefilling: list[RequestState] = []
        need = 0
        outgrown = False
        for s in self._running:
            kv_len = s.kv_len
            if kv_len != s.fill_len - 1:
                prefilling.append(s)
            elif kv_len % page_size:
                decodes.append(s)
            elif len(s.page_table) == num_pages:
                self._finish_outgrown(s, events)
                outgrown = True
            else:
                need += 1
                decodes.append(s)
        if outgrown:
            self._drop_stopped()
        retracted = False
        while not self._memory.ensure_free(need):
            # A request alone in the pool that has not outgrown it always fits, so another runs.
            assert len(self._running) > 1, "decode pages missing with a single running request"
            victim = self._running.pop()
            if any(s is victim for s in decodes):
                decodes = [s for s in decodes if s is not victim]
                need -= victim.kv_len % page_size == 0
            prefilling = [s for s in prefilling if s is not victim]
            self._retract(victim)
            retracted = True
        if need:
            pages = self._memory.allocator.alloc(need)
            for s in decodes:
                if s.kv_len % page_size == 0:
                    s.page_table.append(pages.pop())
        return decodes, prefilling, retracted

    def _plan_extends(self, prefilling: list[RequestState], events: list[RequestEvent], *, admit: bool) -> list[Extend]:
        """Prefill work for this step: chunks of requests already prefilling, then (when `admit`)
        new admissions in policy order, while the prefill budget, the running cap and the pool allow.
        A retracted request whose sequence has outgrown the whole pool finishes with "length"."""
        schedule = get_schedule()
        chunk = chunk_size_of(schedule)
        budget = schedule.max_prefill_tokens
        extends: list[Extend] = []
        for s in prefilling:
            ext = self._memory.snapshot_cut(s, extend_len_of(s.fill_len - s.kv_len, chunk, budget, first=not extends))
            if ext == 0 or not self._grow_if_fits(s, ext, others=len(self._running) > 1):
                return extends
            self._memory.plan_snapshot(s, s.kv_len + ext)
            extends.append((s, ext))
            budget -= ext
        if not admit or not self._waiting:
            return extends
        num_pages = self._memory.allocator.num_pages
        admitted = False
        for s in admission_order(self._waiting, schedule.schedule_policy, self._memory.cache):
            if pages_for(s.fill_len) > num_pages:
                self._finish_outgrown(s, events)
                admitted = True
                continue
            if s.grammar_pending is not None:
                if not s.grammar_pending.done():
                    continue  # its grammar compiles: the requests after it may go first
                admitted |= not self._take_grammar(s, events)
                if s.status != "waiting":
                    continue
            if len(self._running) >= schedule.max_running_requests or not self._memory.can_admit():
                break
            self._memory.attach_prefix(s)
            ext = self._memory.snapshot_cut(s, extend_len_of(s.fill_len - s.kv_len, chunk, budget, first=not extends))
            if ext == 0 or not self._grow_if_fits(s, ext, others=bool(self._running)):
                self._memory.detach_prefix(s)
                break
            self._memory.plan_snapshot(s, s.kv_len + ext)
            s.status = "running"
            self._running.append(s)
            self._tally.admitted_tokens += s.fill_len
            self._tally.cached_tokens += s.kv_len
            if s.cached_tokens is None:
                s.cached_tokens = s.kv_len
            extends.append((s, ext))
            budget -= ext
            admitted = True
        if admitted:  # some left the queue
            self._waiting = [s for s in self._waiting if s.status == "waiting"]
        return extends

    def _take_grammar(self, s: RequestState, events: list[RequestEvent]) -> bool:
        """Give waiting `s` its compiled matcher; False (and `s` failed, with the engine's message)
        when its constraint did not compile."""
        assert s.grammar_pending is not None
        try:
            s.grammar = s.grammar_pending.result()
        except Exception as err:
            self._fail(s, f"request failed: its output constraint did not compile: {err}", events)
            return False
        finally:
            s.grammar_pending = None
        return True

    def _await_grammars(self) -> None:
        """With nothing to run, wait briefly for a queued request's grammar to compile."""
        pending = [s.grammar_pending for s in self._waiting if s.grammar_pending is not None]
        if pending:
            wait(pending, timeout=_GRAMMAR_WAIT_S, return_when=FIRST_COMPLETED)

    def _grow_if_fits(self, s: RequestState, ext: int, others: bool) -> bool:
        """Give `s` the pages for `ext` more tokens if the pool has them. When this chunk ends the
        prompt and other requests share the pool, one more page must also be available for the
        request's first decode, so that admitting it does not force a retraction next step."""
        end = s.kv_len + ext
        new_pages = pages_for(end) - len(s.page_table)
        reserve = 1 if others and end == s.fill_len and end % get_schedule().page_size == 0 else 0
        if self._memory.available_pages() < new_pages + reserve or not self._memory.ensure_free(new_pages):
            return False
        self._memory.grow(s, end)
        return True

    # ---- results ----------------------------------------------------------------------------

    def _absorb(
        self, extends: list[Extend], decodes: list[RequestState], output: ForwardOutputView, events: list[RequestEvent]
    ) -> None:
        """Advance every request of the batch: cache completed chunks, append and report sampled
        tokens, finish the requests that are done. A request the executor reports failed (or
        answers no token for where it samples) fails alone."""
        context = self._context_length()
        tokens, logprobs, tops = output.next_token_ids, output.next_token_logprobs, output.top_logprobs
        for s, error in zip([s for s, _ in extends] + decodes, output.errors, strict=True):
            if error is not None:
                self._fail(s, error, events)
        sampled: list[tuple[RequestState, int]] = []
        for i, (s, ext) in enumerate(extends):
            if s.status == "running":
                s.kv_len += ext
                self._memory.restored(s)
                self._memory.commit(s)
                self._memory.keep_snapshot(s)
                if s.kv_len == s.fill_len:
                    sampled.append((s, i))
        for i, s in enumerate(decodes, len(extends)):
            if s.status == "running":
                s.kv_len += 1
                sampled.append((s, i))
        done: list[RequestState] = []
        for s, i in sampled:
            if self._emit(s, tokens[i], logprobs[i], tops[i], context, events) is not None:
                done.append(s)
        for s in done:
            self._finish(s)

    def _absorb_verify(
        self,
        decodes: list[RequestState],
        drafts: list[list[int]],
        output: ForwardOutputView,
        events: list[RequestEvent],
    ) -> None:
        """Advance every request of a verify step by the samples it keeps (speculation.py judges its
        drafts against the target's samples): each is appended and reported, up to a stop, and a
        request that goes on gives back the pages of the positions it did not keep."""
        assert self._speculation is not None and output.verified is not None
        context = self._context_length()
        done: list[RequestState] = []
        judged = self._speculation.judge(decodes, drafts, output.verified, output.errors)
        for s, verified, kept in zip(decodes, output.verified, judged, strict=True):
            if isinstance(kept, str):
                self._fail(s, kept, events)
                continue
            for j in range(kept):
                reason = self._emit(
                    s, verified.token_ids[j], verified.logprobs[j], verified.top_logprobs[j], context, events
                )
                if s.status != "running":  # the sample was no token: it failed
                    break
                s.kv_len += 1
                if reason is not None:
                    done.append(s)
                    break
            else:
                self._memory.shrink_to_computed(s)
        for s in done:
            self._finish(s)

    def _emit(
        self,
        s: RequestState,
        token: int,
        logprob: float | None,
        top: Sequence[tuple[int, float]] | None,
        context: int,
        events: list[RequestEvent],
    ) -> FinishReason | None:
        """Append and report `token`, sampled for `s`; its finish reason, else None. A sample that is
        no token fails `s` instead."""
        if token < 0:
            self._fail(
                s,
                f"request failed: the executor returned token {token} for it where it samples; "
                "accepted: a token id >= 0",
                events,
            )
            return None
        if s.grammar is not None and not s.grammar.accept_token(token):
            self._fail(
                s, f"request failed: the executor sampled token {token}, which its output constraint forbids", events
            )
            return None
        s.append_output(token)
        reason = finish_reason_of(s, token, context)
        if reason is None and s.grammar is not None and s.grammar.is_terminated():
            reason = "stop"
        events.append(event_of(s, reason, token=token, logprob=logprob, top=top))
        return reason

    def _drop_stopped(self) -> None:
        """Take the requests that finished or failed out of the running list (retraction pops its own)."""
        self._running = [s for s in self._running if s.status == "running"]

    def _end(self, s: RequestState) -> None:
        """`s` leaves the scheduler: it frees what it holds (its computed full pages stay cached)."""
        if s.status == "running":
            self._memory.release(s)
        s.status = "finished"
        del self._live[s.req.rid]
        self._forget(s)

    def _forget(self, s: RequestState) -> None:
        if self._speculation is not None:
            self._speculation.forget(s.req.rid)

    def _finish(self, s: RequestState) -> None:
        self._end(s)
        self._tally.finished += 1

    def _fail(self, s: RequestState, reason: str, events: list[RequestEvent]) -> None:
        """End a running request that failed while being served: its pages are freed (its computed
        full pages stay cached), its client hears `reason`. The caller drops it from `_running`."""
        self._end(s)
        self._tally.failed += 1
        events.append(event_of(s, "abort", error=reason))

    def _finish_outgrown(self, s: RequestState, events: list[RequestEvent]) -> None:
        """End a request whose next token would need more KV than the whole pool: reason "length", no token."""
        self._finish(s)
        events.append(event_of(s, "length"))

    def _retract(self, s: RequestState) -> None:
        self._forget(s)  # its pages may go to others: what a draft kept of it is void
        self._memory.release(s)
        s.status = "waiting"
        bisect.insort(self._waiting, s, key=lambda w: w.seq)
        self._tally.retractions += 1
