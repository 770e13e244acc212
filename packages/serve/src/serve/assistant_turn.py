"""One choice's assistant turn read from its text: the reasoning split off first (when the request
reads reasoning), then tool calls read out of the rest (when it may call tools). A stream reads
each piece as it comes; a whole answer is the same reading of the whole text, so the two agree.

A forced call's turn has no reasoning split: the grammar makes its output the call from the
first token, so there is no reasoning to split off.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from config_bags.server.bags.serving import ReasoningParser, ToolCallParser
from serve.assistant.events import Arguments, CallOpened, Content, Event, Reasoning, TextReader
from serve.assistant.reasoning import ThinkSplitter
from serve.tool_calls.families import call_reader
from serve.tool_calls.forced import NamedCallReader, required_reader


@dataclass(frozen=True)
class FamilyCalls:
    """Calls the model may write in `family`'s syntax (tool_choice "auto")."""

    family: ToolCallParser
    names: tuple[str, ...]


@dataclass(frozen=True)
class RequiredCalls:
    """An array of calls the grammar forces (tool_choice "required")."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class NamedCall:
    """The arguments of a call of `name` the grammar forces (tool_choice naming it)."""

    name: str


CallReading = FamilyCalls | RequiredCalls | NamedCall


@dataclass(frozen=True)
class TurnReading:
    """How a request's turns are read: the reasoning parser (None: no split), the calls (None:
    all content), and whether only the first call counts (parallel_tool_calls false)."""

    reasoning: ReasoningParser | None = None
    calls: CallReading | None = None
    first_call_only: bool = False

    def new_turn(self) -> AssistantTurn:
        """A reader for one choice's turn."""
        calls: TextReader | None = None
        if isinstance(self.calls, FamilyCalls):
            calls = call_reader(self.calls.family, self.calls.names)
        elif isinstance(self.calls, RequiredCalls):
            calls = required_reader(self.calls.names)
        elif isinstance(self.calls, NamedCall):
            calls = NamedCallReader(self.calls.name)
        splitter = ThinkSplitter(self.reasoning) if self.reasoning is not None else None
        return AssistantTurn(splitter, calls, self.first_call_only)


class AssistantTurn:
    """One choice's turn being read (a `TextReader`); `called` tells whether it made a call."""

    def __init__(self, splitter: TextReader | None, calls: TextReader | None, first_call_only: bool) -> None:
        self._splitter = splitter
        self._calls = calls
        self._first_call_only = first_call_only
        self.called = False

    def feed(self, text: str) -> list[Event]:
        """The events the text so far settles."""
        split = self._splitter.feed(text) if self._splitter is not None else [Content(text)] if text else []
        return self._kept(self._read_calls(split))

    def finish(self) -> list[Event]:
        """The events of what was held back, the text having ended."""
        events = self._read_calls(self._splitter.finish()) if self._splitter is not None else []
        if self._calls is not None:
            events.extend(self._calls.finish())
        return self._kept(events)

    def _read_calls(self, events: Iterable[Event]) -> list[Event]:
        if self._calls is None:
            return list(events)
        read: list[Event] = []
        for event in events:
            read.extend(self._calls.feed(event.text) if isinstance(event, Content) else [event])
        return read

    def _kept(self, events: list[Event]) -> list[Event]:
        """Without the calls after the first when only the first counts."""
        if self._first_call_only:
            events = [e for e in events if not isinstance(e, CallOpened | Arguments) or e.index == 0]
        self.called = self.called or any(isinstance(e, CallOpened) for e in events)
        return events


@dataclass(frozen=True)
class Call:
    """A tool call of a turn, whole."""

    call_id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class TurnAnswer:
    """A turn's events put together: its content, its reasoning and its calls."""

    content: str
    reasoning: str
    calls: tuple[Call, ...]


def answer_of(events: Iterable[Event]) -> TurnAnswer:
    """The events of a turn, put together."""
    content: list[str] = []
    reasoning: list[str] = []
    opened: list[CallOpened] = []
    arguments: dict[int, list[str]] = {}
    for event in events:
        if isinstance(event, Content):
            content.append(event.text)
        elif isinstance(event, Reasoning):
            reasoning.append(event.text)
        elif isinstance(event, CallOpened):
            opened.append(event)
            arguments[event.index] = []
        else:
            arguments[event.index].append(event.text)
    calls = tuple(Call(o.call_id, o.name, "".join(arguments[o.index])) for o in opened)
    return TurnAnswer("".join(content), "".join(reasoning), calls)


def read_whole(reading: TurnReading, text: str) -> TurnAnswer:
    """A whole turn's text, read as a stream of it would be."""
    turn = reading.new_turn()
    return answer_of([*turn.feed(text), *turn.finish()])
