"""A response's output items, built from its assistant turn's events (`serve.assistant.events`) as
they arrive, with the stream events OpenAI's Responses stream has for each step: an item is added,
its part is added, its text or arguments grow by deltas, and each is done in turn. A whole
response is built by the same steps (its events unused), so the streamed and the whole output
agree.

Items: reasoning (a `reasoning` item, its text a `reasoning_text` part), the answer (a `message`
with one `output_text` part), each call (a `function_call` with its call id). A turn that wrote
nothing still answers one message, of empty text.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from serve.assistant.events import Arguments, CallOpened, Content, Event
from serve.http.responses_object import new_item_id

StreamEvent = tuple[str, dict[str, Any]]  # (type, fields other than type and sequence_number)


class OutputItems:
    """The output items of one response so far (`items`, done ones), and the stream events of
    each step."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self._open: dict[str, Any] | None = None
        self._text = ""  # the open item's text or arguments so far

    def read(self, events: Iterable[Event]) -> list[StreamEvent]:
        """The stream events of a turn's events."""
        stream: list[StreamEvent] = []
        for event in events:
            if isinstance(event, CallOpened):
                stream.extend(self._close("completed"))
                item = {
                    "id": new_item_id("fc"),
                    "type": "function_call",
                    "call_id": event.call_id,
                    "name": event.name,
                    "arguments": "",
                    "status": "in_progress",
                }
                stream.append(self._opened(item))
            elif isinstance(event, Arguments):
                self._text += event.text
                stream.append(("response.function_call_arguments.delta", {**self._where(), "delta": event.text}))
            else:
                kind = "message" if isinstance(event, Content) else "reasoning"
                if self._open is None or self._open["type"] != kind:
                    stream.extend(self._close("completed"))
                    stream.extend(self._opened_with_part(kind))
                self._text += event.text
                delta = "response.output_text.delta" if isinstance(event, Content) else "response.reasoning_text.delta"
                extra: dict[str, Any] = {"logprobs": []} if isinstance(event, Content) else {}
                stream.append((delta, {**self._where(), "content_index": 0, "delta": event.text, **extra}))
        return stream

    def finish(self, status: str) -> list[StreamEvent]:
        """The stream events that close the turn, its items at `status` ("completed", or
        "incomplete" when it ran out of tokens); an empty message when it wrote nothing."""
        stream = list(self._close(status))
        if not self.items:
            stream.extend(self._opened_with_part("message"))
            stream.extend(self._close(status))
        return stream

    def _where(self) -> dict[str, Any]:
        assert self._open is not None
        return {"item_id": self._open["id"], "output_index": len(self.items)}

    def _opened(self, item: dict[str, Any]) -> StreamEvent:
        self._open, self._text = item, ""
        return ("response.output_item.added", {"output_index": len(self.items), "item": dict(item)})

    def _opened_with_part(self, kind: str) -> list[StreamEvent]:
        item: dict[str, Any]
        if kind == "message":
            item = {"id": new_item_id("msg"), "type": "message", "role": "assistant", "status": "in_progress"}
        else:
            item = {"id": new_item_id("rs"), "type": "reasoning", "summary": [], "status": "in_progress"}
        added = self._opened({**item, "content": []})
        part = ("response.content_part.added", {**self._where(), "content_index": 0, "part": _part(kind, "")})
        return [added, part]

    def _close(self, status: str) -> list[StreamEvent]:
        """The events that finish the open item, which joins `items`."""
        item = self._open
        if item is None:
            return []
        where = self._where()
        stream: list[StreamEvent] = []
        if item["type"] == "function_call":
            done = {**item, "arguments": self._text, "status": status}
            stream.append(("response.function_call_arguments.done", {**where, "arguments": self._text}))
        else:
            kind = item["type"]
            part = _part(kind, self._text)
            text_done = "response.output_text.done" if kind == "message" else "response.reasoning_text.done"
            extra: dict[str, Any] = {"logprobs": []} if kind == "message" else {}
            stream.append((text_done, {**where, "content_index": 0, "text": self._text, **extra}))
            stream.append(("response.content_part.done", {**where, "content_index": 0, "part": part}))
            done = {**item, "content": [part], "status": status}
        stream.append(("response.output_item.done", {"output_index": where["output_index"], "item": done}))
        self.items.append(done)
        self._open, self._text = None, ""
        return stream


def _part(kind: str, text: str) -> dict[str, Any]:
    """The content part of a message (`output_text`) or of reasoning (`reasoning_text`)."""
    if kind == "message":
        return {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
    return {"type": "reasoning_text", "text": text}
