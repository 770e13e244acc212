"""The `<tool_call>` family (Hermes 2 Pro, Qwen2.5, Qwen3; `--tool-call-parser hermes` or
`qwen25`; also the server's own generic format): each call is one JSON object between tags, any
number of them, with content before, between or after:

    Let me look.
    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

Under tool_choice "auto" the grammar engine holds the calls to this form (`calls_constraint`, an
xgrammar structural tag): the text is free until the model writes `<tool_call>`; from there the
call object is forced, its name one of the functions offered and its arguments that function's
schema, up to `</tool_call>`, and the text is free again (or, when only one call is allowed, the
turn ends).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from runtime_scheduler import OutputConstraint
from serve.tool_calls.call_grammar import call_tag, structural_tag
from serve.tool_calls.json_calls import CallSyntax, JsonCallReader

OPENER = "<tool_call>"
CLOSER = "</tool_call>"
SYNTAX = CallSyntax(
    opener=OPENER,
    leading=None,
    leading_object=False,
    separator=None,
    closer=CLOSER,
    argument_keys=("arguments", "parameters"),
)


def written_call(name: str, arguments: Any) -> str:
    """A call as this family writes it (the form `calls_constraint` holds the model to)."""
    return f"{call_head(name)}{json.dumps(arguments, ensure_ascii=False)}{_CALL_END}"


def call_head(name: str) -> str:
    """A call's text up to its arguments."""
    return f'{OPENER}\n{{"name": {json.dumps(name, ensure_ascii=False)}, "arguments": '


_CALL_END = "}\n" + CLOSER


def calls_constraint(functions: Sequence[tuple[str, Mapping[str, Any]]], one: bool) -> OutputConstraint:
    """Free text in which each `<tool_call>` is a call of one of `functions` (name, parameters
    schema) with arguments matching its schema; after the first call the turn ends when `one`."""
    tags = [call_tag(call_head(name), parameters, _CALL_END) for name, parameters in functions]
    return structural_tag({"type": "triggered_tags", "triggers": [OPENER], "tags": tags, "stop_after_first": one})


def hermes_reader(names: Collection[str]) -> JsonCallReader:
    """A reader of one turn's `<tool_call>` calls of the functions `names`."""
    return JsonCallReader(SYNTAX, names)
