"""The Llama 3.1-3.3 JSON family (`--tool-call-parser llama3`): a call is a JSON object
`{"name": ..., "parameters": {...}}` that opens the answer, or follows `<|python_tag|>` anywhere
in it; several are separated by `;`:

    <|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": ...}

An object later in the answer without the tag is content (an answer may well show JSON), and so
is `<|python_tag|>` followed by anything but a call object (the built-in tools' Python calls).
`<|python_tag|>` is a special token: with skip_special_tokens (the default) it is not in the
text, and a call is then read where it opens the answer.

Under tool_choice "auto" the grammar engine holds the calls to this form (`calls_constraint`): an
answer that opens with `{` (after any whitespace) is calls, each `{"name": ..., "parameters":
...}` of a function offered with arguments matching its schema, separated by `; `, and the turn
ends after them (after the first when only one is allowed); any other answer is free text. So a
JSON object can still be shown inside an answer, but not open one.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from runtime_scheduler import OutputConstraint
from serve.tool_calls.call_grammar import call_tag, structural_tag
from serve.tool_calls.json_calls import CallSyntax, JsonCallReader

PYTHON_TAG = "<|python_tag|>"
SYNTAX = CallSyntax(
    opener=PYTHON_TAG,
    leading=None,
    leading_object=True,
    separator=";",
    closer=None,
    argument_keys=("parameters", "arguments"),
)


def llama3_reader(names: Collection[str]) -> JsonCallReader:
    """A reader of one turn's Llama 3 JSON calls of the functions `names`."""
    return JsonCallReader(SYNTAX, names)


def call_head(name: str) -> str:
    """A call's text up to its arguments."""
    return f'{{"name": {json.dumps(name, ensure_ascii=False)}, "parameters": '


def calls_constraint(functions: Sequence[tuple[str, Mapping[str, Any]]], one: bool) -> OutputConstraint:
    """An answer of calls of `functions` (name, parameters schema) with arguments matching their
    schemas (only the first when `one`), or free text that does not open with `{`."""
    calls = {
        "type": "tags_with_separator",
        "tags": [call_tag(call_head(name), parameters, "}") for name, parameters in functions],
        "separator": "; ",
        "at_least_one": True,
        "stop_after_first": one,
    }
    text = {"type": "sequence", "elements": [{"type": "regex", "pattern": r"[^{\s]"}, {"type": "any_text"}]}
    answer = {"type": "or", "elements": [calls, {"type": "optional", "content": text}]}
    return structural_tag({"type": "sequence", "elements": [{"type": "regex", "pattern": r"\s*"}, answer]})
