"""Which family of call syntax a turn's text is read with: the one `serving.tool_call_parser`
names, else the one the chat template writes when it writes exactly one (`<tool_call>`: hermes;
`<|python_tag|>` or "Environment: ipython": llama3). A template that writes neither, or both,
names none: the server's own format (`serve.tool_calls.generic_format`) stands in, unless the
operator names a family with --tool-call-parser."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, get_args

from config_bags.server.bags.serving import ToolCallParser
from runtime_scheduler import OutputConstraint
from serve.assistant.events import TextReader
from serve.tool_calls import hermes, llama3
from serve.tool_calls.hermes import OPENER as HERMES_OPENER
from serve.tool_calls.hermes import hermes_reader
from serve.tool_calls.llama3 import PYTHON_TAG, llama3_reader

FAMILIES: tuple[ToolCallParser, ...] = get_args(ToolCallParser)
# What a chat template that renders a family's calls holds.
_TEMPLATE_MARKS: Mapping[ToolCallParser, tuple[str, ...]] = {
    "hermes": (HERMES_OPENER,),
    "llama3": (PYTHON_TAG, "Environment: ipython"),
}


def family_of_template(template: str | None) -> ToolCallParser | None:
    """The one family whose calls `template` renders, None when it renders none or several."""
    if template is None:
        return None
    found = [family for family, marks in _TEMPLATE_MARKS.items() if any(mark in template for mark in marks)]
    return found[0] if len(found) == 1 else None


def call_reader(family: ToolCallParser, names: Collection[str]) -> TextReader:
    """A reader of one turn's calls of the functions `names` in `family`'s syntax (qwen25 writes
    hermes's)."""
    if family == "llama3":
        return llama3_reader(names)
    return hermes_reader(names)


def calls_constraint(
    family: ToolCallParser, functions: Sequence[tuple[str, Mapping[str, Any]]], one: bool
) -> OutputConstraint:
    """The grammar that holds the calls of `functions` (name, parameters schema) the model may
    write under tool_choice "auto", in `family`'s syntax, to their schemas (at most one when `one`)."""
    if family == "llama3":
        return llama3.calls_constraint(functions, one)
    return hermes.calls_constraint(functions, one)
