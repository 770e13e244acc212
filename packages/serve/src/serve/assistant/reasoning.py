"""The model's `<think>...</think>` reasoning split from its answer (`--reasoning-parser`).

- qwen3: the model opens the block itself. Output that does not open with `<think>` (after
  whitespace) has no reasoning: it is all content, a `</think>` in it included.
- deepseek-r1: the prompt opens the block (the template ends with `<think>`), so the output starts
  inside it and the reasoning runs to `</think>`; a `<think>` the model writes first anyway is
  dropped.

In both, reasoning that never closes (the turn ran out of tokens while thinking) is all reasoning,
and the answer after `</think>` starts at its first non-space character. The reasoning is kept as
written, its newlines included.
"""

from __future__ import annotations

import enum

from config_bags.server.bags.serving import ReasoningParser
from serve.assistant.events import Content, Event, Reasoning
from serve.assistant.markers import partial_marker

OPEN, CLOSE = "<think>", "</think>"
# What the server writes to close a think block whose thinking budget is spent: the end marker,
# then the blank line the models write before their answer.
FORCED_CLOSE = CLOSE + "\n\n"
# The thinking budget, in tokens, of each reasoning effort (`reasoning_effort`, `reasoning.effort`).
EFFORT_BUDGETS = {"low": 1024, "medium": 4096, "high": 16384}


def still_thinking(parser: ReasoningParser, text: str) -> bool:
    """Whether a turn whose output so far is `text` is inside its think block: opened (by the
    prompt, for deepseek-r1; by the model's first characters, for qwen3) and not yet closed."""
    opened = parser == "deepseek-r1" or text.lstrip().startswith(OPEN)
    return opened and CLOSE not in text


class _State(enum.Enum):
    START = enum.auto()  # does the output open the block?
    THINKING = enum.auto()
    ANSWER = enum.auto()


class ThinkSplitter:
    """Reads one turn's text (a `TextReader`) into Reasoning and Content."""

    def __init__(self, parser: ReasoningParser) -> None:
        self._opened_by_prompt = parser == "deepseek-r1"
        self._text = ""
        self._state = _State.START
        self._skip_space = False

    def feed(self, text: str) -> list[Event]:
        """The events the text so far settles."""
        self._text += text
        return self._read(final=False)

    def finish(self) -> list[Event]:
        """The events of what was held back, the text having ended."""
        return self._read(final=True)

    def _read(self, final: bool) -> list[Event]:
        events: list[Event] = []
        if self._state is _State.START and not self._start(final):
            return events
        if self._state is _State.THINKING:
            self._think(events, final)
        if self._state is _State.ANSWER:
            if self._skip_space:
                self._text = self._text.lstrip()
                self._skip_space = not self._text
            if self._text:
                events.append(Content(self._text))
                self._text = ""
        return events

    def _start(self, final: bool) -> bool:
        """Decide whether the output opens the block; False while it cannot tell yet."""
        rest = self._text.lstrip()
        if rest.startswith(OPEN):
            self._text, self._state = rest[len(OPEN) :], _State.THINKING
        elif OPEN.startswith(rest) and not final:
            return False
        else:
            self._state = _State.THINKING if self._opened_by_prompt else _State.ANSWER
        return True

    def _think(self, events: list[Event], final: bool) -> None:
        end = self._text.find(CLOSE)
        if end >= 0:
            if end:
                events.append(Reasoning(self._text[:end]))
            self._text, self._state, self._skip_space = self._text[end + len(CLOSE) :], _State.ANSWER, True
            return
        keep = 0 if final else partial_marker(self._text, CLOSE)
        settled = self._text[: len(self._text) - keep]
        if settled:
            events.append(Reasoning(settled))
        self._text = self._text[len(settled) :]
