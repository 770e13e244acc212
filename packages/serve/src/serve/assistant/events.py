"""The pieces an assistant turn's text is read into, in the order the text holds them, and the
readers that produce them."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class Content:
    """Text of the answer."""

    text: str


@dataclass(frozen=True)
class Reasoning:
    """Text of the model's reasoning before its answer."""

    text: str


@dataclass(frozen=True)
class CallOpened:
    """A tool call begins: its position in the turn, its id and the function it calls."""

    index: int
    call_id: str
    name: str


@dataclass(frozen=True)
class Arguments:
    """More of a call's arguments, as the JSON text the model wrote."""

    index: int
    text: str


Event = Content | Reasoning | CallOpened | Arguments


class TextReader(Protocol):
    """Reads a turn's text as it arrives: `feed` each new piece, then `finish` once it ended.
    Text that may still turn out to be part of a marker is held back until the next piece (or
    `finish`) decides, so the events of any split of a text are the events of the whole text."""

    def feed(self, text: str) -> list[Event]:
        """The events the text so far settles."""
        ...

    def finish(self) -> list[Event]:
        """The events of what was held back, the text having ended."""
        ...


def new_call_id() -> str:
    """A fresh tool-call id, in OpenAI's `call_...` form."""
    return "call_" + uuid.uuid4().hex[:24]
