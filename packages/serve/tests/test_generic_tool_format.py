"""The server's own tool format, rendered as messages any template knows: the tools in the
system message (appended to the conversation's own), calls written into the assistant's content
in the `<tool_call>` syntax its reader reads back, and a run of tool results in one user message."""

from __future__ import annotations

import json
from typing import Any

from serve.assistant_turn import FamilyCalls, TurnReading, read_whole
from serve.tool_calls.generic_format import generic_conversation, tools_section

TOOL: Any = {"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}
CALLS: Any = [
    {"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": 1}}},
    {"id": "c2", "type": "function", "function": {"name": "add", "arguments": {"a": 2}}},
]


def test_tools_calls_and_results_become_text() -> None:
    conversation = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Add."},
        {"role": "assistant", "content": "Adding.", "tool_calls": CALLS},
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
        {"role": "tool", "tool_call_id": "c2", "content": "2"},
    ]
    system, user, assistant, results = generic_conversation(conversation, [TOOL])
    assert system == {"role": "system", "content": "Be brief.\n\n" + tools_section([TOOL])}
    assert json.dumps(TOOL["function"]) in system["content"] and user == conversation[1]
    assert results == {
        "role": "user",
        "content": "<tool_response>\n1\n</tool_response>\n<tool_response>\n2\n</tool_response>",
    }
    # What the assistant's turn says is what the reader of the format reads back.
    answer = read_whole(TurnReading(calls=FamilyCalls("hermes", ("add",))), assistant["content"])
    assert answer.content == "Adding." and [json.loads(c.arguments) for c in answer.calls] == [{"a": 1}, {"a": 2}]
    assert "tool_calls" not in assistant


def test_without_tools_the_conversation_is_as_sent() -> None:
    conversation = [{"role": "user", "content": "Hi"}]
    assert generic_conversation(conversation, []) == conversation
    assert generic_conversation(conversation, [TOOL])[0] == {"role": "system", "content": tools_section([TOOL])}
