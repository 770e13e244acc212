"""The Llama 3.1-3.3 JSON family (`--tool-call-parser llama3`): a call is a JSON object
`{"name": ..., "parameters": {...}}` that opens the answer, or follows `<|python_tag|>` anywhere
in it; several are separated by `;`:

    <|python_tag|>{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": ...}

An object later in the answer without the tag is content (an answer may well show JSON), and so
is `<|python_tag|>` followed by anything but a call object (the built-in tools' Python calls).
`<|python_tag|>` is a special token: with skip_special_tokens (the default) it is not in the
text, and a call is then read where it opens the answer.
"""

from __future__ import annotations

from collections.abc import Collection

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
