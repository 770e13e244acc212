"""End to end, tool calling and reasoning content through the official `openai` client against two
real servers on tiny random checkpoints, whose chat templates render tools in the `<tool_call>`
form (hermes) and in Llama 3's JSON form (this one with the grammar backend off).

A random model writes no call of its own, so what it can show is shown here, and the readers'
handling of calls the model writes is pinned by packages/serve/tests/test_tool_call_readers.py:
forced calls (tool_choice "required" and a named function) always come back as calls whose
arguments validate against the function's schema (checked by `jsonschema`, not by the grammar
engine that made them), whole and streamed, through the client's stream helper; with "auto" (and
"none") a turn without a call is the model's text as content, exactly what /generate gives for the
same prompt (tools rendered into it); the parser is inferred from each template; reasoning parsers
set while serving split what /generate gives; a tool-result turn renders the call and its result
through the template; the tool fields that cannot be served, and a forced call beside a
structured output, are 400s naming the field. A template
that names no parser gets the server's generic format: tests/test_e2e_generic_tool_calls.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import openai
import pytest

from serve_testing.server import ServerProcess
from serve_testing.tiny_checkpoint import build_tiny_checkpoint
from serve_testing.tool_schemas import WEATHER
from serve_testing.tool_templates import HERMES_TEMPLATE, LLAMA3_TEMPLATE, with_chat_template

pytestmark = pytest.mark.timeout(600)

MODEL = "tiny-llama"
ADD = {
    "type": "object",
    "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99}, "b": {"type": "boolean"}},
    "required": ["a", "b"],
    "additionalProperties": False,
}
SCHEMAS = {"get_weather": WEATHER, "add": ADD}
TOOLS: list[Any] = [
    {"type": "function", "function": {"name": name, "description": f"{name}.", "parameters": schema, "strict": True}}
    for name, schema in SCHEMAS.items()
]
LOOSE_TOOLS: list[Any] = [{**t, "function": {**t["function"], "strict": False}} for t in TOOLS]
USER: Any = {"role": "user", "content": "What is the weather in Paris?"}
GREEDY: dict[str, Any] = {"model": MODEL, "temperature": 0.0, "max_tokens": 96}


def launch(folder: Path, template: str, *flags: str) -> ServerProcess:
    checkpoint = with_chat_template(build_tiny_checkpoint(folder / MODEL), template)
    return ServerProcess(checkpoint, "--max-total-tokens", "8192", "--device", "cpu", "--dtype", "float32", *flags)


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProcess]]:
    """The two servers, started together (their startups overlap where one waits)."""
    root = tmp_path_factory.mktemp("tool-servers")
    running = {
        "hermes": launch(root / "hermes", HERMES_TEMPLATE),
        "llama3": launch(root / "llama3", LLAMA3_TEMPLATE, "--grammar-backend", "none"),
    }
    try:
        for server in running.values():
            server.wait_ready()
        yield running
    finally:
        for server in running.values():
            server.stop()


@pytest.fixture(scope="module")
def hermes(servers: dict[str, ServerProcess]) -> ServerProcess:
    return servers["hermes"]


@pytest.fixture(scope="module")
def client(hermes: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=hermes.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)


def validated(call: Any) -> dict[str, Any]:
    """The call's arguments, checked against its function's schema."""
    arguments: dict[str, Any] = json.loads(call.function.arguments)
    jsonschema.validate(arguments, SCHEMAS[call.function.name])
    return arguments


def streamed(client: openai.OpenAI, **body: Any) -> Any:
    """The final completion the client's stream helper assembles from the deltas."""
    with client.chat.completions.stream(**body) as stream:
        return stream.get_final_completion()


def test_a_named_call_is_forced_whole_and_streamed(client: openai.OpenAI) -> None:
    """A named tool_choice gives one call of that function whose arguments match its schema, with
    no content, finishing "tool_calls"; the stream's first delta of the call carries its id,
    type and name with empty arguments, and the client's stream helper assembles the same call
    (and parses its strict arguments); the message sent back with the tool's result is answered.

    Reverse-verified (with the "required" cases): with `generate_requests` dropping the
    constraint, the tiny model's output was no JSON and no "required" turn was read as calls."""
    choice: Any = {"type": "function", "function": {"name": "get_weather"}}
    body = {**GREEDY, "messages": [USER], "tools": TOOLS, "tool_choice": choice}
    whole = client.chat.completions.create(**body).choices[0]
    assert whole.finish_reason == "tool_calls" and whole.message.content is None
    (call,) = whole.message.tool_calls or []
    assert call.type == "function" and call.id.startswith("call_") and call.function.name == "get_weather"
    arguments = validated(call)

    chunks = list(client.chat.completions.create(**body, stream=True))
    opening = next(c.choices[0].delta.tool_calls[0] for c in chunks if c.choices and c.choices[0].delta.tool_calls)
    assert opening.index == 0 and opening.id and opening.type == "function"
    assert opening.function is not None and (opening.function.name, opening.function.arguments) == ("get_weather", "")
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "tool_calls"

    final = streamed(client, **body).choices[0]
    (call,) = final.message.tool_calls or []
    assert final.finish_reason == "tool_calls" and call.function.name == "get_weather"
    assert validated(call) == arguments == call.function.parsed_arguments

    # The client's loop: the assistant message as it came back, then the tool's result.
    result = {"role": "tool", "tool_call_id": call.id, "content": "sunny"}
    answer = client.chat.completions.create(**{**GREEDY, "max_tokens": 4}, messages=[USER, final.message, result])
    assert answer.choices[0].finish_reason in ("stop", "length")


@pytest.mark.parametrize("parallel", [False, True])
def test_required_calls_are_forced_whole_and_streamed(client: openai.OpenAI, parallel: bool) -> None:
    """tool_choice "required" gives at least one call (exactly one with parallel_tool_calls
    false), each of an offered function with arguments matching its schema; streamed, the client
    assembles the same calls."""
    body = {**GREEDY, "max_tokens": 160, "messages": [USER], "tools": TOOLS, "tool_choice": "required"}
    body["parallel_tool_calls"] = parallel
    whole = client.chat.completions.create(**body).choices[0]
    calls = whole.message.tool_calls or []
    assert whole.finish_reason == "tool_calls" and whole.message.content is None
    assert len(calls) == 1 if not parallel else len(calls) >= 1
    final = streamed(client, **body).choices[0]
    assert [(c.function.name, validated(c)) for c in final.message.tool_calls or []] == [
        (c.function.name, validated(c)) for c in calls
    ]


def generated(http: httpx.Client, messages: list[Any], tools: list[Any] | None, max_tokens: int) -> tuple[str, str]:
    """What /generate answers (greedy) to the prompt the chat template renders: text, finish."""
    rendered = http.post("/tokenize", json={"messages": messages, **({"tools": tools} if tools else {})})
    assert rendered.status_code == 200, rendered.text
    body = {"input_ids": rendered.json()["tokens"], "sampling_params": {"max_new_tokens": max_tokens, "temperature": 0}}
    answer = http.post("/generate", json=body).json()
    return answer["text"], answer["meta_info"]["finish_reason"]["type"]


@pytest.fixture(scope="module")
def http(hermes: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=hermes.base_url, timeout=120) as c:
        yield c


@pytest.mark.parametrize("tool_choice", ["auto", "none"])
def test_a_turn_without_a_call_is_the_models_text(client: openai.OpenAI, http: httpx.Client, tool_choice: str) -> None:
    """With tools offered and the parser inferred from the template (hermes), a turn in which the
    model writes no call is its text as content, exactly as /generate gives it for the rendered
    prompt (tools included), whole and streamed; the tools reach the template."""
    text, finish = generated(http, [USER], LOOSE_TOOLS, 24)
    assert text != generated(http, [USER], None, 24)[0], "the tools were not rendered into the prompt"
    body = {**GREEDY, "max_tokens": 24, "messages": [USER], "tools": LOOSE_TOOLS, "tool_choice": tool_choice}
    whole = client.chat.completions.create(**body).choices[0]
    assert (whole.message.content, whole.message.tool_calls, whole.finish_reason) == (text, None, finish)
    # chunks, not the stream helper: it refuses a turn cut by its length when tools were offered
    chunks = [c.choices[0] for c in client.chat.completions.create(**body, stream=True) if c.choices]
    assert "".join(c.delta.content or "" for c in chunks) == text
    assert [c.finish_reason for c in chunks][-1] == finish and not any(c.delta.tool_calls for c in chunks)


def test_a_tool_result_turn_renders_the_call_and_its_result(client: openai.OpenAI, http: httpx.Client) -> None:
    """An assistant turn's calls (arguments as the JSON text the client got) and the tool's result
    render through the template (checked in the rendered prompt) and are answered."""
    calling = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_7", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": true}'}}
        ],
    }
    conversation: list[Any] = [USER, calling, {"role": "tool", "tool_call_id": "call_7", "content": "4"}]
    rendered = http.post("/tokenize", json={"messages": conversation, "tools": LOOSE_TOOLS}).json()["tokens"]
    text = http.post("/detokenize", json={"tokens": rendered}).json()["prompt"]
    assert '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": true}}\n</tool_call>' in text
    assert "<tool_response>\n4\n</tool_response>" in text
    answer = client.chat.completions.create(**{**GREEDY, "max_tokens": 8}, messages=conversation, tools=LOOSE_TOOLS)
    assert answer.choices[0].finish_reason in ("stop", "length")


def test_reasoning_parsers_split_the_models_text(
    hermes: ServerProcess, client: openai.OpenAI, http: httpx.Client
) -> None:
    """With reasoning_parser deepseek-r1 (set while serving: read at each request) the model's text,
    which never closes the think block the prompt opens, is all reasoning, whole and streamed;
    with qwen3 (the model would open the block itself, and does not) it is all content."""
    text, _ = generated(http, [USER], None, 16)
    assert "</think>" not in text
    body = {**GREEDY, "max_tokens": 16, "messages": [USER]}
    try:
        assert http.patch("/v1/runtime_config", json={"reasoning_parser": "deepseek-r1"}).status_code == 200
        message: Any = client.chat.completions.create(**body).choices[0].message
        assert (message.content, message.reasoning_content) == (None, text)
        with client.chat.completions.stream(**body) as stream:
            reasoning = "".join(
                getattr(e.chunk.choices[0].delta, "reasoning_content", None) or ""
                for e in stream
                if e.type == "chunk" and e.chunk.choices
            )
        assert reasoning == text
        assert http.patch("/v1/runtime_config", json={"reasoning_parser": "qwen3"}).status_code == 200
        message = client.chat.completions.create(**body).choices[0].message
        assert (message.content, message.reasoning_content) == (text, None)
    finally:
        http.patch("/v1/runtime_config", json={"reasoning_parser": None})
    assert "reasoning_content" not in client.chat.completions.create(**body).choices[0].message.model_dump()


NAMED_ADD: Any = {"type": "function", "function": {"name": "add"}}
BAD = {
    "tool_choice naming no offered function": (
        {"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "divide"}}},
        "tool_choice.function.name",
    ),
    "required without tools": ({"tool_choice": "required"}, "tool_choice"),
    "named without tools": ({"tool_choice": NAMED_ADD}, "tool_choice.function.name"),
    "a schema that does not compile": (
        {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": 5}}}]},
        "tools.0.function.parameters",
    ),
    "a function offered twice": ({"tools": [TOOLS[0], TOOLS[0]], "tool_choice": "required"}, "tools.1.function.name"),
    "a result answering no call": (
        {"messages": [USER, {"role": "tool", "tool_call_id": "call_9", "content": "4"}]},
        "messages.1.tool_call_id",
    ),
    "arguments that are not an object": (
        {
            "messages": [
                USER,
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c", "type": "function", "function": {"name": "add", "arguments": "[1]"}}],
                },
            ]
        },
        "messages.1.tool_calls.0.function.arguments",
    ),
}


@pytest.mark.parametrize("name", list(BAD))
def test_tool_fields_that_cannot_be_served_are_a_400_naming_the_field(http: httpx.Client, name: str) -> None:
    fields, param = BAD[name]
    response = http.post("/v1/chat/completions", json={**GREEDY, "messages": [USER], **fields})
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param, response.json()


def test_a_forced_call_with_a_structured_output_is_refused(http: httpx.Client) -> None:
    """A forced call's grammar and a structured output's would both constrain the one output: the
    request is refused naming tool_choice, and the same format with tool_choice "auto" is served."""
    body = {
        **GREEDY,
        "max_tokens": 8,
        "messages": [USER],
        "tools": LOOSE_TOOLS,
        "response_format": {"type": "json_object"},
    }
    for choice in ("required", NAMED_ADD):
        response = http.post("/v1/chat/completions", json={**body, "tool_choice": choice})
        assert response.status_code == 400 and response.json()["error"]["param"] == "tool_choice", response.text
        assert "structured output" in response.json()["error"]["message"]
    assert http.post("/v1/chat/completions", json={**body, "tool_choice": "auto"}).status_code == 200


@pytest.fixture(scope="module")
def llama3(servers: dict[str, ServerProcess]) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=servers["llama3"].base_url, timeout=120) as http:
        yield http


def test_llama3_is_inferred_and_forced_calls_need_the_grammar(llama3: httpx.Client) -> None:
    """A Llama 3 template names its parser (auto is served with no --tool-call-parser); with the
    grammar backend off, a forced call is a 400 saying so, and nothing else changes."""
    auto = llama3.post(
        "/v1/chat/completions", json={**GREEDY, "max_tokens": 8, "messages": [USER], "tools": LOOSE_TOOLS}
    )
    assert auto.status_code == 200, auto.text
    for choice in ("required", NAMED_ADD):
        refused = llama3.post(
            "/v1/chat/completions", json={**GREEDY, "messages": [USER], "tools": TOOLS, "tool_choice": choice}
        )
        assert refused.status_code == 400 and refused.json()["error"]["param"] == "tool_choice"
        assert "--grammar-backend none" in refused.json()["error"]["message"]
