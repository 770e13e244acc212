"""The `<tool_call>` family (Hermes 2 Pro, Qwen2.5, Qwen3; `--tool-call-parser hermes` or
`qwen25`): each call is one JSON object between tags, any number of them, with content before,
between or after:

    Let me look.
    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>
"""

from __future__ import annotations

from collections.abc import Collection

from serve.tool_calls.json_calls import CallSyntax, JsonCallReader

OPENER = "<tool_call>"
SYNTAX = CallSyntax(
    opener=OPENER,
    leading=None,
    leading_object=False,
    separator=None,
    closer="</tool_call>",
    argument_keys=("arguments", "parameters"),
)


def hermes_reader(names: Collection[str]) -> JsonCallReader:
    """A reader of one turn's `<tool_call>` calls of the functions `names`."""
    return JsonCallReader(SYNTAX, names)
