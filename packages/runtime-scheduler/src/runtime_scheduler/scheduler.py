"""Continuous batching: each step admits, chunks, decodes and retracts, then runs one forward.

The serving loop calls `add_request`, `abort` and `step` from one thread. `step` never waits for
anything but the forward it runs; with nothing to do it returns at once. Every schedule leaf
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
"""

from __future__ import annotations

import bisect

from collections.abc import Sequence

from config_bags import (
    chunk_size_of,
    context_length_of,
    get_model,
    get_schedule,
    get_spec,
    max_speculative_num_draft_tokens,
)

from runtime_scheduler.admission import admission_order, extend_len_of, refusal_reason
from runtime_scheduler.audit import audit_pages
from runtime_scheduler.batch_assembly import Extend, forward_batch_of
from runtime_scheduler.events import Refusal, RequestEvent
from runtime_scheduler.executor import ForwardOutputView, ModelExecutor, VerifiedView, is_unrecoverable
from runtime_scheduler.kv_memory import KvMemory, pages_for
from runtime_scheduler.metrics import SchedulerMetrics
from runtime_scheduler.request import FinishReason, Request
from runtime_scheduler.request_state import RequestState
from runtime_scheduler.speculation import DraftRequest, Speculator
from runtime_scheduler.stop import finish_reason_of


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
    without one): each running request holds one, admission waits for a free one, and such a
    model reuses no cached prefix (kv_memory.py says why).
    """

    def __init__(self, executor: ModelExecutor, *, model_max_length: int, max_total_tokens: int,
                 speculator: Speculator | None = None, state_slots: int = 0) -> None:
        if model_max_length < 1:
            raise ValueError(f"model_max_length={model_max_length} is not accepted; accepted: an int >= 1")
        page_size = get_schedule().page_size
        if max_total_tokens < page_size:
            raise ValueError(f"max_total_tokens={max_total_tokens} is not accepted; accepted: at least one page ({page_size} slots)")
        algorithm = get_spec().speculative_algorithm
        if (algorithm is None) != (speculator is None):
            raise ValueError(f"spec.speculative_algorithm is {algorithm!r} but the scheduler was "
                             f"{'given no' if speculator is None else 'given a'} speculator; accepted: a speculator exactly when it is set")
        self._executor = executor
        self._speculator = speculator
        self._model_max_length = model_max_length
        if state_slots < 0:
            raise ValueError(f"state_slots={state_slots} is not accepted; accepted: 0 (no recurrent state) or the slots of the runner's state pool")
        self._memory = KvMemory(max_total_tokens, state_slots=state_slots)
        self._waiting: list[RequestState] = []  # by arrival
        self._running: list[RequestState] = []  # by admission
        self._live: dict[str, RequestState] = {}
        self._next_seq = 0
        self._admitted_tokens = 0
        self._cached_tokens = 0
        self._retractions = 0
        self._finished = 0
        self._aborted = 0
        self._failed = 0
        self._verify_steps = 0
        self._draft_tokens = 0
        self._accepted_tokens = 0
        self._accept_lengths: list[int] = [0]

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
        context = context_length_of(get_model(), self._model_max_length)
        reason = refusal_reason(req, context, pool_tokens, len(self._waiting), schedule.max_queued_requests)
        if reason is not None:
            return Refusal(rid=req.rid, reason=reason)
        state = RequestState(req, self._next_seq)
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
        self._aborted += 1
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
            return events
        drafts: list[list[int]] | None = None
        try:
            if decodes and not extends and self._speculator is not None:
                drafts = self._drafts_for(decodes)
            batch = forward_batch_of(extends, decodes, drafts)
            output = self._executor.forward(batch)
            n = len(batch.requests)
            answers = (output.next_token_ids, output.next_token_logprobs, output.top_logprobs, output.errors)
            counts = tuple(len(answer) for answer in answers)
            if counts != (n, n, n, n):
                raise RuntimeError(
                    f"the executor returned (token ids, logprobs, top logprobs, errors) of lengths {counts} for a batch "
                    f"of {n} requests; accepted: one of each per request, in batch order"
                )
            if drafts is not None:
                _check_verified(output.verified, [1 + len(d) for d in drafts])
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
        allocator, cache = self._memory.allocator, self._memory.cache
        total = allocator.num_pages
        return SchedulerMetrics(
            num_running=len(self._running),
            num_waiting=len(self._waiting),
            total_pages=total,
            free_pages=allocator.free_count,
            cached_pages=cache.cached_pages,
            evictable_pages=cache.evictable_pages,
            token_usage=(total - allocator.free_count - cache.evictable_pages) / total,
            admitted_tokens=self._admitted_tokens,
            cached_tokens=self._cached_tokens,
            cache_hit_rate=self._cached_tokens / self._admitted_tokens if self._admitted_tokens else 0.0,
            num_retractions=self._retractions,
            num_finished=self._finished,
            num_aborted=self._aborted,
            num_failed=self._failed,
            spec_verify_steps=self._verify_steps,
            spec_draft_tokens=self._draft_tokens,
            spec_accepted_tokens=self._accepted_tokens,
            spec_accept_length_counts=tuple(self._accept_lengths) if self._speculator is not None else (),
        )

    def audit(self) -> None:
        """Check every page's ownership and the cache's locks (a full walk; for tests and debugging)."""
        audit_pages(self._memory, self._running, self._waiting)

    # ---- planning ---------------------------------------------------------------------------

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
            ext = extend_len_of(s.fill_len - s.kv_len, chunk, budget, first=not extends)
            if ext == 0 or not self._grow_if_fits(s, ext, others=len(self._running) > 1):
                return extends
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
            if len(self._running) >= schedule.max_running_requests or not self._memory.can_admit():
                break
            self._memory.attach_prefix(s)
            ext = extend_len_of(s.fill_len - s.kv_len, chunk, budget, first=not extends)
            if ext == 0 or not self._grow_if_fits(s, ext, others=bool(self._running)):
                self._memory.detach_prefix(s)
                break
            s.status = "running"
            self._running.append(s)
            self._admitted_tokens += s.fill_len
            self._cached_tokens += s.kv_len
            if s.cached_tokens is None:
                s.cached_tokens = s.kv_len
            extends.append((s, ext))
            budget -= ext
            admitted = True
        if admitted:  # some left the queue
            self._waiting = [s for s in self._waiting if s.status == "waiting"]
        return extends

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

    def _drafts_for(self, decodes: list[RequestState]) -> list[list[int]] | None:
        """Each decode's drafts for a verify step, or None when none got any (the step decodes
        plainly, as does a step decoding more than spec.speculative_disable_by_batch_size requests,
        where the verify's extra rows cost more than they give). A request is offered as many as
        spec's budget (and its even share of spec.speculative_max_drafts_per_step, at least one),
        its remaining new tokens and the context leave, and the pages the pool can give now
        (evicting the cache, never retracting); the pages of drafts the speculator did not propose
        go back at once."""
        spec = get_spec()
        budget = max_speculative_num_draft_tokens() - 1
        limit = spec.speculative_disable_by_batch_size
        if budget <= 0 or (limit is not None and len(decodes) > limit):
            return None
        if spec.speculative_max_drafts_per_step is not None:
            budget = min(budget, max(1, spec.speculative_max_drafts_per_step // len(decodes)))
        assert self._speculator is not None
        context = context_length_of(get_model(), self._model_max_length)
        offers: list[DraftRequest] = []
        for s in decodes:
            room = min(budget, s.req.stop.max_new_tokens - len(s.output_ids) - 1, context - s.fill_len)
            if room > 0:
                room = self._reserve_draft_pages(s, room)
            offers.append(DraftRequest(rid=s.req.rid, kv_len=s.kv_len, max_drafts=max(room, 0), page_table=s.page_table,
                                       prompt_ids=s.req.prompt_ids, output_ids=s.output_ids,
                                       state_slot=-1 if s.state_slot is None else s.state_slot))
        wanted = [o for o in offers if o.max_drafts > 0]
        proposed = list(self._speculator.propose(wanted)) if wanted else []
        if len(proposed) != len(wanted):
            raise RuntimeError(f"the speculator answered {len(proposed)} draft lists for {len(wanted)} requests; accepted: one per request")
        answers = iter(proposed)
        drafts = [_checked_drafts(o, next(answers)) if o.max_drafts > 0 else [] for o in offers]
        for s, d in zip(decodes, drafts, strict=True):
            keep = pages_for(s.kv_len + 1 + len(d))
            self._memory.allocator.free(s.page_table[keep:])
            del s.page_table[keep:]
        return drafts if any(drafts) else None

    def _reserve_draft_pages(self, s: RequestState, room: int) -> int:
        """Give `s` the pages for `room` drafts after its last token, or as many drafts as its
        pages and the pool hold; how many drafts that is."""
        page_size = get_schedule().page_size
        held = len(s.page_table) * page_size - s.kv_len - 1  # drafts the request's pages hold already
        if room <= held:
            return room
        extra = pages_for(s.kv_len + 1 + room) - len(s.page_table)
        extra = min(extra, self._memory.available_pages())
        if extra > 0 and self._memory.ensure_free(extra):
            s.page_table.extend(self._memory.allocator.alloc(extra))
        return min(room, len(s.page_table) * page_size - s.kv_len - 1)

    # ---- results ----------------------------------------------------------------------------

    def _absorb(
        self,
        extends: list[Extend],
        decodes: list[RequestState],
        output: ForwardOutputView,
        events: list[RequestEvent],
    ) -> None:
        """Advance every request of the batch: cache completed chunks, append and report sampled
        tokens, finish the requests that are done. A request the executor reports failed (or
        answers no token for where it samples) fails alone."""
        context = context_length_of(get_model(), self._model_max_length)
        tokens, logprobs, tops = output.next_token_ids, output.next_token_logprobs, output.top_logprobs
        for s, error in zip([s for s, _ in extends] + decodes, output.errors, strict=True):
            if error is not None:
                self._fail(s, error, events)
        sampled: list[tuple[RequestState, int]] = []
        for i, (s, ext) in enumerate(extends):
            if s.status == "running":
                s.kv_len += ext
                self._memory.commit(s)
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
        """Advance every request of a verify step: the speculator judges its drafts against the
        target's samples; the request appends the accepted drafts and the sample after them (each
        reported, up to a stop), and gives back the pages of positions it did not keep."""
        assert self._speculator is not None and output.verified is not None
        context = context_length_of(get_model(), self._model_max_length)
        self._verify_steps += 1
        done: list[RequestState] = []
        for s, own, verified, error in zip(decodes, drafts, output.verified, output.errors, strict=True):
            if error is not None:
                self._fail(s, error, events)
                continue
            accepted = self._speculator.verify(s.req.rid, own, verified.token_ids) if own else 0
            if not 0 <= accepted <= len(own):
                why = f"request failed: the speculator accepted {accepted} of its {len(own)} drafts; accepted: 0..{len(own)}"
                self._fail(s, why, events)
                continue
            if own:
                self._draft_tokens += len(own)
                self._accepted_tokens += accepted
                self._count_accept_length(accepted + 1)
            for j in range(accepted + 1):
                reason = self._emit(s, verified.token_ids[j], verified.logprobs[j], verified.top_logprobs[j], context, events)
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

    def _emit(self, s: RequestState, token: int, logprob: float | None, top: Sequence[tuple[int, float]] | None,
              context: int, events: list[RequestEvent]) -> FinishReason | None:
        """Append and report `token`, sampled for `s`; its finish reason, else None. A sample that is
        no token fails `s` instead."""
        if token < 0:
            self._fail(s, f"request failed: the executor returned token {token} for it where it samples; "
                          "accepted: a token id >= 0", events)
            return None
        s.append_output(token)
        reason = finish_reason_of(s, token, context)
        events.append(_event_of(s, reason, token=token, logprob=logprob, top=top))
        return reason

    def _count_accept_length(self, length: int) -> None:
        while len(self._accept_lengths) <= length:
            self._accept_lengths.append(0)
        self._accept_lengths[length] += 1

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
        if self._speculator is not None:
            self._speculator.forget(s.req.rid)

    def _finish(self, s: RequestState) -> None:
        self._end(s)
        self._finished += 1

    def _fail(self, s: RequestState, reason: str, events: list[RequestEvent]) -> None:
        """End a running request that failed while being served: its pages are freed (its computed
        full pages stay cached), its client hears `reason`. The caller drops it from `_running`."""
        self._end(s)
        self._failed += 1
        events.append(_event_of(s, "abort", error=reason))

    def _finish_outgrown(self, s: RequestState, events: list[RequestEvent]) -> None:
        """End a request whose next token would need more KV than the whole pool: reason "length", no token."""
        self._finish(s)
        events.append(_event_of(s, "length"))

    def _retract(self, s: RequestState) -> None:
        self._forget(s)  # its pages may go to others: what a draft kept of it is void
        self._memory.release(s)
        s.status = "waiting"
        bisect.insort(self._waiting, s, key=lambda w: w.seq)
        self._retractions += 1


def _event_of(s: RequestState, finish_reason: FinishReason | None, *, token: int | None = None,
              logprob: float | None = None, top: Sequence[tuple[int, float]] | None = None,
              error: str | None = None) -> RequestEvent:
    """`s`'s event of this step: a sampled token with its logprobs, or (no token) how it ended."""
    return RequestEvent(rid=s.req.rid, token_id=token, logprob=logprob, top_logprobs=None if top is None else tuple(top),
                        finish_reason=finish_reason, cached_tokens=s.cached_tokens or 0, error=error)


def _checked_drafts(offer: DraftRequest, drafts: Sequence[int]) -> list[int]:
    """A speculator's drafts for `offer`, refused (failing the step) when they break its offer."""
    own = list(drafts)
    if len(own) > offer.max_drafts or any(not isinstance(t, int) or t < 0 for t in own):
        raise RuntimeError(f"the speculator proposed {own[:8]} for request {offer.rid!r}; accepted: at most "
                           f"{offer.max_drafts} token ids >= 0")
    return own


def _check_verified(verified: Sequence[VerifiedView] | None, lengths: list[int]) -> None:
    """Refuse a verify answer that does not give each request one sample per input token."""
    got = None if verified is None else [len(v.token_ids) for v in verified]
    if got != lengths:
        raise RuntimeError(f"the executor answered a target_verify batch with samples of lengths {got}; accepted: "
                           f"{lengths} (one per input token of each request)")
