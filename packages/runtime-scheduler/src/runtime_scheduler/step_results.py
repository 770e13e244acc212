"""What a step's forward answered, applied to its requests: completed chunks cached, sampled tokens
appended and reported, requests that are done finished, and a request the executor reports failed
(or answers no token for where it samples, or a token its grammar forbids) failed alone. A verify
step keeps, per request, the samples its speculator accepts and gives back the pages of the rest."""

from __future__ import annotations

from collections.abc import Sequence

from runtime_scheduler.events import RequestEvent, event_of
from runtime_scheduler.executor import ForwardOutputView
from runtime_scheduler.request import FinishReason
from runtime_scheduler.request_book import RequestBook
from runtime_scheduler.request_state import RequestState
from runtime_scheduler.step_planner import StepPlan
from runtime_scheduler.stop import finish_reason_of


def apply_forward(
    book: RequestBook, plan: StepPlan, output: ForwardOutputView, context: int, events: list[RequestEvent]
) -> None:
    """Advance every request of a plain step by its computed tokens and its sample."""
    tokens, logprobs, tops = output.next_token_ids, output.next_token_logprobs, output.top_logprobs
    for s, error in zip(plan.requests(), output.errors, strict=True):
        if error is not None:
            book.fail(s, error, events)
    sampled: list[tuple[RequestState, int]] = []
    for i, (s, ext) in enumerate(plan.extends):
        if s.status == "running":
            s.kv_len += ext
            book.memory.restored(s)
            book.memory.commit(s)
            book.memory.keep_snapshot(s)
            if s.kv_len == s.fill_len:
                sampled.append((s, i))
    for i, s in enumerate(plan.decodes, len(plan.extends)):
        if s.status == "running":
            s.kv_len += 1
            sampled.append((s, i))
    done: list[RequestState] = []
    for s, i in sampled:
        if _emit(book, s, tokens[i], logprobs[i], tops[i], context, events) is not None:
            done.append(s)
    for s in done:
        book.finish(s)


def apply_verify(
    book: RequestBook,
    decodes: list[RequestState],
    drafts: list[list[int]],
    output: ForwardOutputView,
    context: int,
    events: list[RequestEvent],
) -> None:
    """Advance every request of a verify step by the samples it keeps (speculation.py judges its
    drafts against the target's samples): each is appended and reported, up to a stop, and a
    request that goes on gives back the pages of the positions it did not keep."""
    assert book.speculation is not None and output.verified is not None
    done: list[RequestState] = []
    judged = book.speculation.judge(decodes, drafts, output.verified, output.errors)
    for s, verified, kept in zip(decodes, output.verified, judged, strict=True):
        if isinstance(kept, str):
            book.fail(s, kept, events)
            continue
        for j in range(kept):
            reason = _emit(
                book, s, verified.token_ids[j], verified.logprobs[j], verified.top_logprobs[j], context, events
            )
            if s.status != "running":  # the sample was no token: it failed
                break
            s.kv_len += 1
            if reason is not None:
                done.append(s)
                break
        else:
            book.memory.shrink_to_computed(s)
    for s in done:
        book.finish(s)


def _emit(
    book: RequestBook,
    s: RequestState,
    token: int,
    logprob: float | None,
    top: Sequence[tuple[int, float]] | None,
    context: int,
    events: list[RequestEvent],
) -> FinishReason | None:
    """Append and report `token`, sampled for `s`; its finish reason, else None. A sample that is
    no token, or one its grammar forbids, fails `s` instead."""
    if token < 0:
        book.fail(
            s,
            f"request failed: the executor returned token {token} for it where it samples; accepted: a token id >= 0",
            events,
        )
        return None
    if s.grammar is not None and not s.grammar.accept_token(token):
        book.fail(s, f"request failed: the executor sampled token {token}, which its output constraint forbids", events)
        return None
    s.append_output(token)
    reason = finish_reason_of(s, token, context)
    if reason is None and s.grammar is not None and s.grammar.is_terminated():
        reason = "stop"
    events.append(event_of(s, reason, token=token, logprob=logprob, top=top))
    return reason
