"""The SSE body of a streamed response, as OpenAI's Responses stream: `response.created` and
`response.in_progress`, the output items' events as the turn is read (`serve.http.responses_output`),
then `response.completed` (or `response.incomplete` when it ran out of tokens) with usage; every
event numbered by `sequence_number`. A server fault ends the stream with an `error` event."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

from serve.assistant_turn import TurnReading
from serve.http.responses_object import ResponseHead, status_of
from serve.http.responses_output import OutputItems, StreamEvent
from serve.http.sse import sse_event
from serve.http.streams import ChoiceResult, fault_error, merged
from serve.http.thinking_budget import ThinkingBudget
from serve.ipc.messages import GenerateRequest
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.request_state import ServerFaultError

# The finished Response object of the output items and the whole result (and it is stored).
Finished = Callable[[list[dict[str, Any]], ChoiceResult], dict[str, Any]]


async def response_stream(
    manager: TokenizerManager,
    request: GenerateRequest,
    reading: TurnReading,
    head: ResponseHead,
    finished: Finished,
    budget: ThinkingBudget | None,
) -> AsyncIterator[bytes]:
    """The events of the response `head` names, running `request` (thinking within `budget`, if
    given) read as `reading` says."""
    sequence = 0

    def framed(event: StreamEvent) -> bytes:
        nonlocal sequence
        name, fields = event
        sequence += 1
        return sse_event(name, {"type": name, "sequence_number": sequence - 1, **fields})

    running = head.response("in_progress", [])
    yield framed(("response.created", {"response": running}))
    yield framed(("response.in_progress", {"response": running}))
    items, turn, result = OutputItems(), reading.new_turn(), ChoiceResult()
    try:
        async with aclosing(merged(manager, [request], budget)) as outputs:
            async for _, out in outputs:
                result.add(out)
                events = turn.feed(out.text)
                if out.finish is not None:
                    events.extend(turn.finish())
                for event in items.read(events):
                    yield framed(event)
    except ServerFaultError as err:
        error = fault_error(err)
        yield framed(("error", {"code": error.code, "message": error.message, "param": error.param}))
        return
    status = status_of(result.finish)
    for event in items.finish(status):
        yield framed(event)
    last = "response.completed" if status == "completed" else "response.incomplete"
    yield framed((last, {"response": finished(items.items, result)}))
