"""End to end, tools on a model whose chat template has no tool syntax (as the default model's),
with no server flag, through the official `openai` client against a real server on a tiny random
checkpoint: the server writes the tools into the prompt in its own format, reads the model's
`<tool_call>` calls, and under tool_choice "auto" the grammar engine holds each call to its
function's schema from the marker on.

A random model does not decide to call a tool, so the tests steer its first token to the marker:
the checkpoint's tokenizer has `<tool_call>` as one token, and the requests give it a logit_bias
of +100. Everything after the marker is the grammar's doing (the model is free again once a call
closes), so a call that comes back well-formed and valid for its schema (checked by `jsonschema`,
not by the engine) is what the structural tag guarantees.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import openai
import pytest

from serve_testing.server import ServerProcess
from serve_testing.tiny_checkpoint import build_tiny_checkpoint
from serve_testing.tool_schemas import WEATHER

pytestmark = pytest.mark.timeout(600)

MODEL = "tiny-plain"
MARKER = "<tool_call>"

TOOL: Any = {
    "type": "function",
    "function": {"name": "forecast", "description": "The weather ahead.", "parameters": WEATHER, "strict": True},
}
QUESTION: Any = {"role": "user", "content": "Will it rain in Lima?"}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """The tiny checkpoint with its plain ChatML template (no tool syntax) and `<tool_call>` as a token."""
    checkpoint = build_tiny_checkpoint(tmp_path_factory.mktemp("generic-tools") / MODEL, added_tokens=[MARKER])
    running = ServerProcess(checkpoint, "--max-total-tokens", "8192", "--device", "cpu", "--dtype", "float32")
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=120) as client:
        yield client


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def to_the_marker(http: httpx.Client) -> dict[str, Any]:
    """The request fields that steer the model's first token to the call marker."""
    (marker,) = http.post("/tokenize", json={"prompt": MARKER, "add_special_tokens": False}).json()["tokens"]
    # Room for a call whose every gap the random model fills with the most whitespace allowed.
    return {"model": MODEL, "temperature": 0.0, "max_tokens": 320, "logit_bias": {str(marker): 100}}


def valid_call(call: Any) -> dict[str, Any]:
    """The call's arguments, checked against the function's schema."""
    assert call.type == "function" and call.id.startswith("call_") and call.function.name == "forecast"
    arguments: dict[str, Any] = json.loads(call.function.arguments)
    jsonschema.validate(arguments, WEATHER)
    return arguments


def test_a_strict_call_under_auto_is_held_to_its_schema(client: openai.OpenAI, to_the_marker: dict[str, Any]) -> None:
    """`strict: true` with tool_choice omitted (what pydantic-ai and openai-agents send) is served
    with no server flag; the call the model opens is well-formed and valid for the schema, whole
    and assembled from the stream by the client's helper; with parallel_tool_calls false the turn
    ends after it (finish "tool_calls", not its length: the grammar allowed nothing more).

    Reverse-verified: with `one_constraint` dropping the calls' grammar under "auto", the model's
    text after the marker was left to it and the request ran to its length."""
    body = {**to_the_marker, "messages": [QUESTION], "tools": [TOOL], "parallel_tool_calls": False}
    whole = client.chat.completions.create(**body)
    choice = whole.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    (call,) = choice.message.tool_calls or []
    arguments = valid_call(call)
    assert whole.usage is not None and whole.usage.completion_tokens < body["max_tokens"]

    with client.chat.completions.stream(**body) as stream:
        final = stream.get_final_completion().choices[0]
    (streamed,) = final.message.tool_calls or []
    assert (
        final.finish_reason == "tool_calls" and valid_call(streamed) == arguments == streamed.function.parsed_arguments
    )


def test_parallel_calls_are_each_held_and_false_allows_one(
    client: openai.OpenAI, to_the_marker: dict[str, Any]
) -> None:
    """Steered to the marker after every call, the model keeps calling while parallel calls are
    allowed, each call valid (but the last, cut by the length); with parallel_tool_calls false
    the same steering gets one call.

    Reverse-verified: with `calls_constraint` ignoring `one` (stop_after_first false), the
    request with parallel_tool_calls false ran to its length."""
    body = {**to_the_marker, "messages": [QUESTION], "tools": [TOOL], "max_tokens": 640}
    many = client.chat.completions.create(**body).choices[0]
    calls = many.message.tool_calls or []
    assert len(calls) >= 2 and many.finish_reason == "length"
    for call in calls[:-1]:  # the last one is cut by the length
        valid_call(call)
    one = client.chat.completions.create(**body, parallel_tool_calls=False).choices[0]
    assert len(one.message.tool_calls or []) == 1 and one.finish_reason == "tool_calls"


def test_a_tool_round_trip_renders_in_the_generic_format(
    client: openai.OpenAI, http: httpx.Client, to_the_marker: dict[str, Any]
) -> None:
    """The assistant message as it came back and the tool's result, sent back as a framework
    does, render through the plain template in the server's format (the tools listed in a system
    message, the call in `<tool_call>` tags, the result in `<tool_response>` tags) and are answered.

    Reverse-verified: with `rendered_prompt` handing the template the messages as they are, the
    rendered prompt held neither the tool list nor the call."""
    body = {**to_the_marker, "messages": [QUESTION], "tools": [TOOL], "parallel_tool_calls": False}
    called = client.chat.completions.create(**body).choices[0].message
    (call,) = called.tool_calls or []
    result = {"role": "tool", "tool_call_id": call.id, "content": "light rain"}
    conversation: list[Any] = [QUESTION, called.model_dump(exclude_none=True), result]
    rendered = http.post("/tokenize", json={"messages": conversation, "tools": [TOOL], "add_special_tokens": False})
    assert rendered.status_code == 200, rendered.text
    prompt = http.post("/detokenize", json={"tokens": rendered.json()["tokens"]}).json()["prompt"]
    assert prompt.startswith("<|im_start|>system\nYou can call these tools:\n" + json.dumps(TOOL["function"]))
    arguments = json.dumps(json.loads(call.function.arguments))  # rendered as the templates do: parsed, then written
    written = f'<tool_call>\n{{"name": "forecast", "arguments": {arguments}}}\n</tool_call>'
    assert f"<|im_start|>assistant\n{written}<|im_end|>" in prompt
    assert "<|im_start|>user\n<tool_response>\nlight rain\n</tool_response><|im_end|>" in prompt
    answer = client.chat.completions.create(
        model=MODEL, temperature=0.0, max_tokens=8, messages=[QUESTION, called, result], tools=[TOOL]
    )
    assert answer.choices[0].finish_reason in ("stop", "length", "tool_calls")


def test_a_schema_the_engine_cannot_compile_is_a_400_naming_the_tool(http: httpx.Client) -> None:
    """A tool schema xgrammar refuses is a 400 in OpenAI's error shape naming the tool and the
    field; the server goes on serving."""
    broken = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": 7}}}
    response = http.post("/v1/chat/completions", json={"model": MODEL, "messages": [QUESTION], "tools": [broken]})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == "tools.0.function.parameters"
    assert "function 'lookup'" in error["message"] and "properties must be an object" in error["message"]
    again = http.post("/v1/chat/completions", json={"model": MODEL, "messages": [QUESTION], "max_tokens": 4})
    assert again.status_code == 200, again.text
