"""Scanning JSON text that may still be arriving: where a value ends, if it has yet, and the head
of a tool-call object (`{"name": ..., "arguments": {...}}`) read as soon as it commits to a call.

Every answer depends only on the text scanned: a value cut off by the end of the text is "not
yet" (None), never a guess, so a reader asking again with more text gets the answer the whole
text gives.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from dataclasses import dataclass

SPACE = " \t\r\n"
_SCALAR = re.compile(r"[-+.0-9A-Za-z]+")


class NotACallError(ValueError):
    """The text cannot be the tool-call object being read."""


def skip_space(text: str, i: int) -> int:
    """The first index at or after `i` that is not JSON whitespace (len(text) when none)."""
    while i < len(text) and text[i] in SPACE:
        i += 1
    return i


def string_end(text: str, i: int) -> int | None:
    """Past the closing quote of the string opening at `i`; None when the text ends first."""
    escaped = False
    for j in range(i + 1, len(text)):
        c = text[j]
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == '"':
            return j + 1
    return None


class Nesting:
    """Finds where JSON text closes the object or array it is `depth` levels inside, counting
    brackets outside strings; resumable, so streamed text is scanned once."""

    def __init__(self, depth: int) -> None:
        self._depth = depth
        self._in_string = False
        self._escaped = False

    def close(self, text: str, start: int) -> int | None:
        """Past the bracket at or after `start` that closes the enclosing value; None when the
        text ends first (a later call goes on from where this one stopped)."""
        for i in range(start, len(text)):
            c = text[i]
            if self._in_string:
                if self._escaped:
                    self._escaped = False
                elif c == "\\":
                    self._escaped = True
                elif c == '"':
                    self._in_string = False
            elif c == '"':
                self._in_string = True
            elif c in "{[":
                self._depth += 1
            elif c in "}]":
                self._depth -= 1
                if self._depth == 0:
                    return i + 1
        return None


def value_end(text: str, i: int) -> int | None:
    """Past the JSON value starting at `i`; None when the text ends first. Raises
    NotACallError where no JSON value starts."""
    c = text[i]
    if c == '"':
        return string_end(text, i)
    if c in "{[":
        return Nesting(0).close(text, i)
    match = _SCALAR.match(text, i)
    if match is None:
        raise NotACallError(f"no JSON value starts with {c!r}")
    if match.end() == len(text):
        return None  # a number or literal may go on
    try:
        json.loads(match.group())
    except json.JSONDecodeError:
        raise NotACallError(f"{match.group()!r} is not a JSON value") from None
    return match.end()


@dataclass(frozen=True)
class CallHead:
    """A call object read up to the point where it is one: its function's name, and where its
    arguments object lies. `arguments_end` is None while the arguments are still open (they then
    stream from `arguments_start`); `arguments_start` is None when the object closed without
    arguments, at `resume`. Reading the rest of the object goes on at `resume`."""

    name: str
    arguments_start: int | None
    arguments_end: int | None
    resume: int


def read_call_head(text: str, start: int, argument_keys: Collection[str], names: Collection[str]) -> CallHead | None:
    """The head of the call object whose `{` is at `start`, once the text commits to it: the name
    (a string naming one of `names`) is read and its arguments object has begun, or the object
    closed with a name and no arguments. None when the text ends before that. Raises
    NotACallError when the text cannot be such an object."""
    name: str | None = None
    arguments: tuple[int, int] | None = None
    i = skip_space(text, start + 1)
    while i < len(text):
        if text[i] == "}":
            if name is None:
                raise NotACallError("the object closed without a name")
            return CallHead(name, None, None, i + 1)
        if text[i] != '"':
            raise NotACallError("a member's key is not a string")
        key_end = string_end(text, i)
        if key_end is None:
            return None
        key = json.loads(text[i:key_end])
        i = skip_space(text, key_end)
        if i == len(text):
            return None
        if text[i] != ":":
            raise NotACallError("a key is not followed by ':'")
        i = skip_space(text, i + 1)
        if i == len(text):
            return None
        if key == "name":
            if text[i] != '"':
                raise NotACallError("the name is not a string")
            end = string_end(text, i)
            if end is None:
                return None
            name = json.loads(text[i:end])
            if name not in names:
                raise NotACallError(f"{name!r} names no tool offered")
            if arguments is not None:
                return CallHead(name, arguments[0], arguments[1], end)
        elif key in argument_keys:
            if text[i] != "{":
                raise NotACallError("the arguments are not an object")
            if name is not None:
                return CallHead(name, i, None, i)
            end = Nesting(0).close(text, i)
            if end is None:
                return None
            arguments = (i, end)
        else:
            end = value_end(text, i)
            if end is None:
                return None
        i = skip_space(text, end)
        if i == len(text):
            return None
        if text[i] == ",":
            i = skip_space(text, i + 1)
        elif text[i] != "}":
            raise NotACallError("a member is not followed by ',' or '}'")
    return None
