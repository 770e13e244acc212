"""End to end, the official `openai` client's agent loop against `serve` on the real default model
(whose chat template has no tool syntax) with no server flag: a strict tool under tool_choice
"auto" (the client's default), called, answered and finished in chat completions, and in the
Responses API streamed, its result sent as a `previous_response_id` continuation. `required` and
named calls, plain Responses and their streams are in tests/test_e2e_responses.py; the generic
format's grammar under "auto" on a random model in tests/test_e2e_generic_tool_calls.py.

The model is steered to its call by the one token of `serve_testing.weather_agent.call_steering`.
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import openai
import pytest

from serve_testing import weather_agent as conversation
from serve_testing.server import ServerProcess

pytestmark = pytest.mark.timeout(600)

CITY_ONLY: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
FUNCTION: dict[str, Any] = {
    "name": conversation.TOOL_NAME,
    "description": conversation.TOOL_DESCRIPTION,
    "parameters": CITY_ONLY,
    "strict": True,
}


@pytest.fixture(scope="module")
def server(default_model_server: ServerProcess) -> ServerProcess:
    return default_model_server


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", timeout=300, max_retries=0)


@pytest.fixture(scope="module")
def steering(server: ServerProcess) -> dict[str, int]:
    return conversation.call_steering(server.base_url)


def answered_from_the_result(text: str) -> bool:
    return all(word in text.lower() for word in conversation.ANSWER_MENTIONS)


def test_a_strict_call_under_auto_round_trips_in_chat(client: openai.OpenAI, steering: dict[str, int]) -> None:
    """The call is parsed into `tool_calls` with schema-valid arguments and finish_reason
    "tool_calls"; the tool message answering it gives the model's text from the result.

    Reverse-verified: with the server's reading of calls under "auto" removed (the turn read as
    content only), the call came back as content and the test failed."""
    past_call = {"id": "call_past", "type": "function", "function": {"name": conversation.TOOL_NAME}}
    past_call["function"]["arguments"] = json.dumps({"city": conversation.PAST_CITY})
    messages: list[Any] = [
        {"role": "user", "content": conversation.PAST_QUESTION},
        {"role": "assistant", "content": None, "tool_calls": [past_call]},
        {"role": "tool", "tool_call_id": "call_past", "content": conversation.PAST_RESULT},
        {"role": "assistant", "content": conversation.PAST_ANSWER},
        {"role": "user", "content": conversation.QUESTION},
    ]
    request: dict[str, Any] = {
        "model": conversation.MODEL,
        "tools": [{"type": "function", "function": FUNCTION}],
        "temperature": 0,
        "max_tokens": 80,
        "logit_bias": steering,
    }
    asked = client.chat.completions.create(messages=messages, **request).choices[0]
    assert asked.finish_reason == "tool_calls" and asked.message.tool_calls is not None
    (call,) = asked.message.tool_calls
    assert call.type == "function" and call.function.name == conversation.TOOL_NAME
    arguments = json.loads(call.function.arguments)
    jsonschema.validate(arguments, CITY_ONLY)
    assert arguments == {"city": conversation.CITY}

    result = {"role": "tool", "tool_call_id": call.id, "content": conversation.RESULT}
    messages += [asked.message.model_dump(exclude_none=True), result]
    answered = client.chat.completions.create(messages=messages, **request).choices[0]
    assert answered.finish_reason == "stop" and not answered.message.tool_calls
    assert answered_from_the_result(answered.message.content or ""), answered.message.content


def test_a_streamed_strict_call_under_auto_continues_by_id(client: openai.OpenAI, steering: dict[str, int]) -> None:
    """Streamed, the client's helper assembles the function call from its argument deltas; the
    call's output sent with `previous_response_id` continues the stored conversation to the
    model's text from the result."""
    past = [
        {"role": "user", "content": conversation.PAST_QUESTION},
        {"type": "function_call", "call_id": "call_past", "name": conversation.TOOL_NAME},
        {"type": "function_call_output", "call_id": "call_past", "output": conversation.PAST_RESULT},
        {"role": "assistant", "content": conversation.PAST_ANSWER},
        {"role": "user", "content": conversation.QUESTION},
    ]
    past[1]["arguments"] = json.dumps({"city": conversation.PAST_CITY})
    request: dict[str, Any] = {
        "model": conversation.MODEL,
        "tools": [{"type": "function", **FUNCTION}],
        "temperature": 0,
        "max_output_tokens": 80,
        "extra_body": {"logit_bias": steering},
    }
    with client.responses.stream(input=past, **request) as stream:
        argument_deltas = [event.delta for event in stream if event.type == "response.function_call_arguments.delta"]
        asked = stream.get_final_response()
    (call,) = [item for item in asked.output if item.type == "function_call"]
    assert call.name == conversation.TOOL_NAME and "".join(argument_deltas) == call.arguments
    assert json.loads(call.arguments) == {"city": conversation.CITY}

    output = {"type": "function_call_output", "call_id": call.call_id, "output": conversation.RESULT}
    answered = client.responses.create(input=[output], previous_response_id=asked.id, **request)
    assert answered.status == "completed" and answered_from_the_result(answered.output_text), answered.output_text
