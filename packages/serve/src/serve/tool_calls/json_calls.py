"""The reader every tool-call family shares: JSON call objects (`{"name": ..., "arguments":
{...}}`) in the model's text, found by the markers of the family's `CallSyntax`, everything else
content.

A call is committed as soon as its object has a name among the tools offered and its arguments
object has begun (or it closed with a name and no arguments): the call opens then, and its
arguments stream as the model writes them, exactly the JSON text it wrote. Text that cannot be a
call (a marker followed by something else, a name no tool has, arguments that are not an object)
goes back to content, markers included. Text that might still be the start of a marker, and
whitespace that might precede one, is held back until the text decides; the whitespace around
calls is dropped, so a turn of calls alone has no content.

A call cut off by the end of the text keeps the arguments written so far (the turn then ended
for its length, and says so).
"""

from __future__ import annotations

import enum
from collections.abc import Collection
from dataclasses import dataclass

from serve.assistant.events import Arguments, CallOpened, Content, Event, new_call_id
from serve.assistant.markers import partial_marker
from serve.tool_calls.json_scan import SPACE, Nesting, NotACallError, read_call_head, skip_space


@dataclass(frozen=True)
class CallSyntax:
    """How a family writes its calls around the JSON objects."""

    opener: str | None  # opens a call anywhere in content ("<tool_call>")
    leading: str | None  # opens a sequence of calls as the text's first non-space text ("[")
    leading_object: bool  # an object as the text's first non-space text is a call
    separator: str | None  # between the calls of one sequence
    closer: str | None  # ends a sequence
    argument_keys: tuple[str, ...]  # the member holding the arguments


class _State(enum.Enum):
    START = enum.auto()  # nothing but whitespace yet
    CONTENT = enum.auto()
    SEQUENCE = enum.auto()  # a call object is expected next
    HEAD = enum.auto()  # a call object began; is it a call?
    ARGUMENTS = enum.auto()  # a committed call's arguments are streaming
    TAIL = enum.auto()  # the rest of a call's object, after its arguments
    BETWEEN = enum.auto()  # after a call: a separator, the closer, or content


# Trim the consumed text once this much of it has piled up (a long answer is then not copied
# whole on every piece).
_TRIM_AT = 4096


class JsonCallReader:
    """Reads one turn's text (a `TextReader`): content, and calls of the functions `names`."""

    def __init__(self, syntax: CallSyntax, names: Collection[str]) -> None:
        self._syntax = syntax
        self._names = frozenset(names)
        self._text = ""
        self._pos = 0
        self._state = _State.START if syntax.leading or syntax.leading_object else _State.CONTENT
        self._restart = 0  # where content resumes if the text at a marker is no call after all
        self._marker = 0  # where that marker is
        self._literal_until = 0  # an opener before this was no call: content, not searched again
        self._skip_space = False  # content right after calls starts at its first non-space
        self._head = 0  # the `{` of the call object being read
        self._calls = 0
        self._nesting = Nesting(0)

    def feed(self, text: str) -> list[Event]:
        """The events the text so far settles."""
        self._text += text
        events: list[Event] = []
        while self._step(events, final=False):
            pass
        self._trim()
        return events

    def finish(self) -> list[Event]:
        """The events of what was held back, the text having ended."""
        events: list[Event] = []
        while self._step(events, final=True):
            pass
        return events

    def _step(self, events: list[Event], final: bool) -> bool:
        """Read on from the current state; False when it waits for more text."""
        state = self._state
        if state is _State.START:
            return self._start(final)
        if state is _State.CONTENT:
            return self._content(events, final)
        if state is _State.SEQUENCE:
            return self._sequence(final)
        if state is _State.HEAD:
            return self._call_head(events, final)
        if state is _State.ARGUMENTS:
            return self._arguments(events)
        if state is _State.TAIL:
            return self._tail()
        return self._between(final)

    def _start(self, final: bool) -> bool:
        text, syntax = self._text, self._syntax
        i = skip_space(text, self._pos)
        if i == len(text):
            if final:
                self._state = _State.CONTENT
            return final
        if syntax.leading and text.startswith(syntax.leading, i):
            self._open_sequence(at=self._pos, marker=i, after=i + len(syntax.leading))
        elif syntax.leading and syntax.leading.startswith(text[i:]) and not final:
            return False
        elif syntax.leading_object and text[i] == "{":
            self._open_sequence(at=self._pos, marker=i, after=i)
        else:
            self._state = _State.CONTENT
        return True

    def _content(self, events: list[Event], final: bool) -> bool:
        text, opener = self._text, self._syntax.opener
        if self._skip_space:
            self._pos = skip_space(text, self._pos)
            if self._pos == len(text):
                return False
            self._skip_space = False
        found = -1 if opener is None else text.find(opener, max(self._pos, self._literal_until))
        if opener is not None and found >= 0:
            kept = text[self._pos : found].rstrip(SPACE)  # the space before a call goes with it
            _emit_content(events, kept)
            self._open_sequence(at=self._pos + len(kept), marker=found, after=found + len(opener))
            return True
        end = len(text)
        if not final and opener is not None:
            end -= partial_marker(text, opener, max(self._pos, self._literal_until))
            end = self._pos + len(text[self._pos : end].rstrip(SPACE))
        _emit_content(events, text[self._pos : end])
        self._pos = end
        return False

    def _sequence(self, final: bool) -> bool:
        i = skip_space(self._text, self._pos)
        if i == len(self._text):
            if final:
                self._no_call()
            return final
        if self._text[i] == "{":
            self._head = i
            self._state = _State.HEAD
        else:
            self._no_call()
        return True

    def _call_head(self, events: list[Event], final: bool) -> bool:
        try:
            head = read_call_head(self._text, self._head, self._syntax.argument_keys, self._names)
        except NotACallError:
            self._no_call()
            return True
        if head is None:
            if final:
                self._no_call()
            return final
        index = self._calls
        self._calls += 1
        events.append(CallOpened(index, new_call_id(), head.name))
        if head.arguments_start is None:
            events.append(Arguments(index, "{}"))
            self._pos, self._state = head.resume, _State.BETWEEN
        elif head.arguments_end is None:
            self._pos, self._state, self._nesting = head.arguments_start, _State.ARGUMENTS, Nesting(0)
        else:
            events.append(Arguments(index, self._text[head.arguments_start : head.arguments_end]))
            self._pos, self._state, self._nesting = head.resume, _State.TAIL, Nesting(1)
        return True

    def _arguments(self, events: list[Event]) -> bool:
        end = self._nesting.close(self._text, self._pos)
        stop = len(self._text) if end is None else end
        if stop > self._pos:
            events.append(Arguments(self._calls - 1, self._text[self._pos : stop]))
            self._pos = stop
        if end is None:
            return False
        self._state, self._nesting = _State.TAIL, Nesting(1)
        return True

    def _tail(self) -> bool:
        end = self._nesting.close(self._text, self._pos)
        if end is None:
            self._pos = len(self._text)
            return False
        self._pos, self._state = end, _State.BETWEEN
        return True

    def _between(self, final: bool) -> bool:
        text, syntax = self._text, self._syntax
        i = skip_space(text, self._pos)
        self._pos = i
        if i == len(text):
            return False
        if syntax.separator and text.startswith(syntax.separator, i):
            self._open_sequence(at=i, marker=i, after=i + len(syntax.separator))
            return True
        if syntax.closer and text.startswith(syntax.closer, i):
            self._pos, self._state, self._skip_space = i + len(syntax.closer), _State.CONTENT, True
            return True
        markers = [m for m in (syntax.separator, syntax.closer) if m]
        if not final and any(m.startswith(text[i:]) for m in markers):
            return False
        self._state = _State.CONTENT
        return True

    def _open_sequence(self, at: int, marker: int, after: int) -> None:
        """The marker (or leading object) at `marker` opens calls, the first read from `after`;
        if none follows, content resumes at `at` (the space before the marker)."""
        self._restart, self._marker, self._pos, self._state = at, marker, after, _State.SEQUENCE

    def _no_call(self) -> None:
        """What followed the marker is no call: it is content, the marker and the space before too."""
        self._pos, self._literal_until, self._state = self._restart, self._marker + 1, _State.CONTENT

    def _trim(self) -> None:
        keep = min(self._pos, self._restart) if self._state in (_State.SEQUENCE, _State.HEAD) else self._pos
        if keep < _TRIM_AT:
            return
        self._text = self._text[keep:]
        self._pos -= keep
        self._restart = max(self._restart - keep, 0)
        self._literal_until = max(self._literal_until - keep, 0)
        self._marker = max(self._marker - keep, 0)
        self._head = max(self._head - keep, 0)


def _emit_content(events: list[Event], text: str) -> None:
    if text:
        events.append(Content(text))
