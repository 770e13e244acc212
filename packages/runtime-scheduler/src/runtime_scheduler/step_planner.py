"""What one step computes, decided before it runs: the running requests that decode (each with a
page for its new token), the chunks of prompts still prefilling, and new admissions in policy
order, within the prefill budget, the running cap and the pool; requests retracted when the pool
cannot hold the decodes, or when prefills wait on each other's pages.

Every reason a request waits is decided here: pages, the running cap, a grammar still compiling
(the requests behind it may go first), a snapshot cut. A new reason to wait belongs in this
module, not in the step. Every schedule leaf is read from the published bags at each decision.
"""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass

from config_bags.server import chunk_size_of, get_schedule
from runtime_scheduler.admission import admission_order, extend_len_of
from runtime_scheduler.batch_assembly import Extend
from runtime_scheduler.events import RequestEvent
from runtime_scheduler.kv_memory import pages_for
from runtime_scheduler.request_book import RequestBook
from runtime_scheduler.request_state import RequestState

_GRAMMAR_WAIT_S = 0.002  # the longest an idle step waits for a grammar to compile


@dataclass(frozen=True)
class StepPlan:
    """A step's work: prompt chunks (request, tokens) and decoding requests, in batch order."""

    extends: list[Extend]
    decodes: list[RequestState]

    def requests(self) -> list[RequestState]:
        """Every request the step computes, in batch order."""
        return [s for s, _ in self.extends] + self.decodes


class StepPlanner:
    """Plans each step over `book`'s requests and memory."""

    def __init__(self, book: RequestBook) -> None:
        self._book = book

    def plan(self, events: list[RequestEvent]) -> StepPlan | None:
        """This step's work, its pages allocated; None when there is nothing to run (after
        waiting briefly for a queued request's grammar, if one compiles). Requests that can never
        fit finish "length" into `events`, and one whose grammar failed to compile fails there."""
        book = self._book
        decodes, prefilling, retracted = self._plan_decodes(events)
        extends = [] if retracted else self._plan_extends(prefilling, events, admit=True)
        while not extends and not decodes and len(book.running) > 1:
            # Prefills that each wait for pages the others hold: the newest steps back.
            book.retract(book.running.pop())
            prefilling = [s for s in book.running if s.kv_len < s.fill_len - 1]
            extends = self._plan_extends(prefilling, events, admit=False)
        if not extends and not decodes:
            self._await_grammars()
            return None
        return StepPlan(extends, decodes)

    def _plan_decodes(self, events: list[RequestEvent]) -> tuple[list[RequestState], list[RequestState], bool]:
        """The running requests that decode this step, each with a page for its new token; the
        running requests still prefilling; whether any request was retracted.

        A request whose next token would need more than the whole pool finishes with reason
        "length". When the pool cannot supply the other decodes' pages even after evicting the
        cache, the most recently admitted requests go back to waiting (their computed prefix
        stays cached).
        """
        book, memory = self._book, self._book.memory
        page_size = get_schedule().page_size
        num_pages = memory.allocator.num_pages
        decodes: list[RequestState] = []
        prefilling: list[RequestState] = []
        need = 0
        outgrown = False
        for s in book.running:
            kv_len = s.kv_len
            if kv_len != s.fill_len - 1:
                prefilling.append(s)
            elif kv_len % page_size:
                decodes.append(s)
            elif len(s.page_table) == num_pages:
                book.finish_outgrown(s, events)
                outgrown = True
            else:
                need += 1
                decodes.append(s)
        if outgrown:
            book.drop_stopped()
        retracted = False
        while not memory.ensure_free(need):
            # A request alone in the pool that has not outgrown it always fits, so another runs.
            assert len(book.running) > 1, "decode pages missing with a single running request"
            victim = book.running.pop()
            if any(s is victim for s in decodes):
                decodes = [s for s in decodes if s is not victim]
                need -= victim.kv_len % page_size == 0
            prefilling = [s for s in prefilling if s is not victim]
            book.retract(victim)
            retracted = True
        if need:
            pages = memory.allocator.alloc(need)
            for s in decodes:
                if s.kv_len % page_size == 0:
                    s.page_table.append(pages.pop())
        return decodes, prefilling, retracted

    def _plan_extends(self, prefilling: list[RequestState], events: list[RequestEvent], *, admit: bool) -> list[Extend]:
        """Prefill work for this step: chunks of requests already prefilling, then (when `admit`)
        new admissions in policy order, while the prefill budget, the running cap and the pool allow.
        A retracted request whose sequence has outgrown the whole pool finishes with "length"."""
        book, memory = self._book, self._book.memory
        schedule = get_schedule()
        chunk = chunk_size_of(schedule)
        budget = schedule.max_prefill_tokens
        extends: list[Extend] = []
        for s in prefilling:
            ext = memory.snapshot_cut(s, extend_len_of(s.fill_len - s.kv_len, chunk, budget, first=not extends))
            if ext == 0 or not self._grow_if_fits(s, ext, others=len(book.running) > 1):
                return extends
            memory.plan_snapshot(s, s.kv_len + ext)
            extends.append((s, ext))
            budget -= ext
        if not admit or not book.waiting:
            return extends
        num_pages = memory.allocator.num_pages
        admitted = False
        for s in admission_order(book.waiting, schedule.schedule_policy, memory.cache):
            if pages_for(s.fill_len) > num_pages:
                book.finish_outgrown(s, events)
                admitted = True
                continue
            if s.grammar_pending is not None:
                if not s.grammar_pending.done():
                    continue  # its grammar compiles: the requests after it may go first
                admitted |= not self._take_grammar(s, events)
                if s.status != "waiting":
                    continue
            if len(book.running) >= schedule.max_running_requests or not memory.can_admit():
                break
            memory.attach_prefix(s)
            ext = memory.snapshot_cut(s, extend_len_of(s.fill_len - s.kv_len, chunk, budget, first=not extends))
            if ext == 0 or not self._grow_if_fits(s, ext, others=bool(book.running)):
                memory.detach_prefix(s)
                break
            memory.plan_snapshot(s, s.kv_len + ext)
            s.status = "running"
            book.running.append(s)
            book.tally.admitted_tokens += s.fill_len
            book.tally.cached_tokens += s.kv_len
            if s.cached_tokens is None:
                s.cached_tokens = s.kv_len
            extends.append((s, ext))
            budget -= ext
            admitted = True
        if admitted:  # some left the queue
            book.drop_admitted()
        return extends

    def _take_grammar(self, s: RequestState, events: list[RequestEvent]) -> bool:
        """Give waiting `s` its compiled matcher; False (and `s` failed, with the engine's message)
        when its constraint did not compile."""
        assert s.grammar_pending is not None
        try:
            s.grammar = s.grammar_pending.result()
        except Exception as err:
            self._book.fail(s, f"request failed: its output constraint did not compile: {err}", events)
            return False
        finally:
            s.grammar_pending = None
        return True

    def _await_grammars(self) -> None:
        """With nothing to run, wait briefly for a queued request's grammar to compile."""
        pending = [s.grammar_pending for s in self._book.waiting if s.grammar_pending is not None]
        if pending:
            wait(pending, timeout=_GRAMMAR_WAIT_S, return_when=FIRST_COMPLETED)

    def _grow_if_fits(self, s: RequestState, ext: int, others: bool) -> bool:
        """Give `s` the pages for `ext` more tokens if the pool has them. When this chunk ends the
        prompt and other requests share the pool, one more page must also be available for the
        request's first decode, so that admitting it does not force a retraction next step."""
        memory = self._book.memory
        end = s.kv_len + ext
        new_pages = pages_for(end) - len(s.page_table)
        reserve = 1 if others and end == s.fill_len and end % get_schedule().page_size == 0 else 0
        if memory.available_pages() < new_pages + reserve or not memory.ensure_free(new_pages):
            return False
        memory.grow(s, end)
        return True
