"""A chat choice in OpenAI's shapes: a turn's events as a stream's deltas, and a whole turn as the
response's message.

Deltas follow OpenAI's stream: text as `content` (and reasoning as both `reasoning_content` and
`reasoning`, the names clients have read it by), each call opening in
a delta of its own (`index`, `id`, `type`, the function's `name`, `arguments` ""), then its
arguments in fragments under the same index, so a client that accumulates deltas (the `openai`
client's stream helpers) assembles the calls. A turn that made calls finishes with
"tool_calls" (unless it ran out of tokens: "length").
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from serve.assistant.events import Arguments, CallOpened, Content, Event
from serve.assistant_turn import AssistantTurn, TurnReading, read_whole
from serve.http.logprobs_format import chat_logprobs
from serve.http.streams import ChoiceResult
from serve.ipc.messages import TextOutput

REASONING_KEYS = ("reasoning_content", "reasoning")  # the names of a turn's reasoning, both written


def deltas_of(events: Iterable[Event]) -> list[dict[str, Any]]:
    """The stream deltas of a turn's events, text merged where it can be."""
    deltas: list[dict[str, Any]] = []
    for event in events:
        last = deltas[-1] if deltas else None
        if isinstance(event, CallOpened):
            function = {"name": event.name, "arguments": ""}
            deltas.append(
                {"tool_calls": [{"index": event.index, "id": event.call_id, "type": "function", "function": function}]}
            )
        elif isinstance(event, Arguments):
            if last is not None and _arguments_of(last, event.index):
                last["tool_calls"][0]["function"]["arguments"] += event.text
            else:
                deltas.append({"tool_calls": [{"index": event.index, "function": {"arguments": event.text}}]})
        else:
            # Reasoning under both names clients read it by (vLLM's reasoning_content, and reasoning).
            keys = ("content",) if isinstance(event, Content) else REASONING_KEYS
            if last is None or "tool_calls" in last:
                last = {}
                deltas.append(last)
            for key in keys:
                last[key] = last.get(key, "") + event.text
    return deltas


def _arguments_of(delta: dict[str, Any], index: int) -> bool:
    """Whether `delta` carries only arguments of call `index` (more can join it)."""
    calls = delta.get("tool_calls")
    return calls is not None and "id" not in calls[0] and calls[0]["index"] == index


def finish_reason(finish: str | None, called: bool) -> str | None:
    """The choice's finish reason: "tool_calls" for a turn that made calls and stopped."""
    return "tool_calls" if called and finish == "stop" else finish


class ChoiceStream:
    """One choice of a streamed chat completion: the chunks of each of its outputs."""

    def __init__(self, index: int, turn: AssistantTurn, logprobs: bool) -> None:
        self._index = index
        self._turn = turn
        self._logprobs = logprobs

    def chunks(self, out: TextOutput) -> list[dict[str, Any]]:
        """The choice objects `out` settles (none while its text is held back and it carries
        no logprobs); logprobs ride on the first, the finish on the last."""
        events = self._turn.feed(out.text)
        if out.finish is not None:
            events.extend(self._turn.finish())
        deltas = deltas_of(events)
        if not deltas and (out.logprobs or out.finish is not None):
            deltas = [{"content": ""} if out.finish is None else {}]
        choices: list[dict[str, Any]] = [
            {"index": self._index, "delta": delta, "logprobs": None, "finish_reason": None, "matched_stop": None}
            for delta in deltas
        ]
        if choices:
            choices[0]["logprobs"] = chat_logprobs(out.logprobs) if self._logprobs else None
            choices[-1]["finish_reason"] = finish_reason(out.finish, self._turn.called)
            choices[-1]["matched_stop"] = out.matched_stop
        return choices


def whole_choice(index: int, reading: TurnReading, result: ChoiceResult, logprobs: bool) -> dict[str, Any]:
    """The response's choice of a whole turn: its message (content, calls, reasoning), logprobs
    and finish reason. Content is null for a turn of calls or reasoning alone."""
    answer = read_whole(reading, result.text)
    message: dict[str, Any] = {"role": "assistant", "content": answer.content}
    if answer.calls:
        message["tool_calls"] = [
            {"id": c.call_id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in answer.calls
        ]
    if (answer.calls or answer.reasoning) and not answer.content:
        message["content"] = None
    if reading.reasoning is not None:
        message.update(dict.fromkeys(REASONING_KEYS, answer.reasoning or None))
    return {
        "index": index,
        "message": message,
        "logprobs": chat_logprobs(result.logprobs) if logprobs else None,
        "finish_reason": finish_reason(result.finish, bool(answer.calls)),
        "matched_stop": result.matched_stop,
    }
