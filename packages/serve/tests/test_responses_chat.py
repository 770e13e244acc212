"""A Responses conversation as chat messages (`serve.http.responses_chat`): the items of one
assistant turn (reasoning, its message, its calls) join one message, every other item is a message
of its own, and chat's refusals are renamed into the Responses request's fields."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from serve.http.errors import APIError
from serve.http.responses_chat import ResponsesNames, chat_messages
from serve.http.responses_request import InputItem

ITEMS: list[Any] = [
    {"type": "message", "role": "user", "content": "Add 2 and 2, then 3 and 3."},
    {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Two adds."}]},
    {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "content": "Adding."},
    {"type": "function_call", "call_id": "c1", "name": "add", "arguments": '{"a": 2}', "id": "fc_1"},
    {"type": "function_call", "call_id": "c2", "name": "add", "arguments": '{"a": 3}'},
    {"type": "function_call_output", "call_id": "c1", "output": "4"},
    {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "6"}]},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "4 and 6."}]},
    {"type": "message", "role": "developer", "content": "Be brief."},
]


def test_one_assistant_turn_is_one_message() -> None:
    """Reverse-verified: with an assistant message always opening a turn of its own, the
    reasoning and the message were two messages and the calls joined the second."""
    items = TypeAdapter(list[InputItem]).validate_python(ITEMS)
    messages, sources = chat_messages([(f"input.{i}", item) for i, item in enumerate(items)])
    calls = [
        {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2}'}},
        {"id": "c2", "type": "function", "function": {"name": "add", "arguments": '{"a": 3}'}},
    ]
    assert messages == [
        {"role": "user", "content": "Add 2 and 2, then 3 and 3."},
        {"role": "assistant", "content": "Adding.", "reasoning_content": "Two adds.", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "c1", "content": "4"},
        {"role": "tool", "tool_call_id": "c2", "content": "6"},
        {"role": "assistant", "content": "4 and 6."},
        {"role": "developer", "content": "Be brief."},
    ]
    assert sources == ["input.0", "input.1", "input.5", "input.6", "input.7", "input.8"]


def test_chat_paths_are_renamed_into_the_requests_fields() -> None:
    names = ResponsesNames(("instructions", "previous_response_id", "input.0", "input.2"))
    err = APIError(400, "messages.3.tool_call_id: 'c9' answers no tool call", param="messages.3.tool_call_id")
    renamed = names.renamed(err)
    assert (renamed.message, renamed.param) == ("input.2.call_id: 'c9' answers no tool call", "input.2.call_id")
    assert names.path("tools.1.function.strict and response_format.json_schema.schema") == (
        "tools.1.strict and text.format.schema"
    )
    assert names.renamed(APIError(400, "too long", param="messages")).param == "input"
    assert names.path("max_completion_tokens, reasoning_effort") == "max_output_tokens, reasoning.effort"
