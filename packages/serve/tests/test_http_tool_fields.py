"""The tool-calling fields of a chat request on a real FastAPI app with the server's request models
and error handlers: what is served (tools, tool_choice, parallel_tool_calls, an assistant's calls
and reasoning, tool results), what the template is given of it, and each 400 naming its field.
The served route is covered end to end in tests/test_e2e_tool_calling.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from serve.http.errors import install_error_handlers
from serve.http.protocol import ChatCompletionRequest, TokenizeBody


def _app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/v1/chat/completions")
    async def chat(body: ChatCompletionRequest) -> dict[str, Any]:
        return {
            "messages": [m.template_message() for m in body.messages],
            "tools": [t.template_tool() for t in body.tools or ()],
            "chosen": body.chosen_tools() if isinstance(body.chosen_tools(), str) else "named",
            "parallel": body.parallel_tool_calls,
        }

    @app.post("/tokenize")
    async def tokenize(body: TokenizeBody) -> dict[str, Any]:
        return {"tools": [t.template_tool() for t in body.tools or ()]}

    return app


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(_app(), raise_server_exceptions=False) as c:
        yield c


USER = {"role": "user", "content": "Add 2 and 2."}
ADD: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
    },
}
CALL = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 2}'}}
CALLING = {"role": "assistant", "content": None, "tool_calls": [CALL]}
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "4"}


def chat(client: TestClient, **fields: Any) -> Any:
    return client.post("/v1/chat/completions", json={"messages": [USER], **fields})


def refused(response: Any, param: str) -> str:
    """The message of a 400 naming `param`; a refusal of this server's starts with it (pydantic's
    own type errors name the top field as the param and the path in the message)."""
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == param and error["message"].startswith(param), error
    message: str = error["message"]
    return message


def test_a_tool_conversation_is_served_and_given_to_the_template(client: TestClient) -> None:
    """Tools go to the template as sent (nulls left out), a past call with its arguments parsed,
    the result with its call's id, an assistant's reasoning as reasoning_content."""
    # as the openai client's helpers send a message back: their parses beside what they parsed
    sent_back = {**CALL, "index": 0, "function": {**CALL["function"], "parsed_arguments": {"a": 2, "b": 2}}}
    thinking = {**CALLING, "tool_calls": [sent_back], "parsed": None, "reasoning_content": "I should add."}
    response = chat(client, messages=[USER, thinking, RESULT], tools=[ADD], parallel_tool_calls=False)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["tools"] == [ADD] and answer["chosen"] == "auto" and answer["parallel"] is False
    assert answer["messages"][1] == {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": {"a": 2, "b": 2}}}
        ],
        "reasoning_content": "I should add.",
    }
    assert answer["messages"][2] == {"role": "tool", "content": "4", "tool_call_id": "call_1"}


def test_reasoning_is_read_by_either_name(client: TestClient) -> None:
    """An assistant's reasoning sent as `reasoning` (or as both names, the same) reaches the
    template as reasoning_content.

    Reverse-verified: with `template_message` reading reasoning_content alone, the reasoning sent
    as `reasoning` did not reach the template."""
    for fields in ({"reasoning": "I know."}, {"reasoning": "I know.", "reasoning_content": "I know."}):
        thought = {"role": "assistant", "content": "4", **fields}
        response = chat(client, messages=[USER, thought])
        assert response.status_code == 200, response.text
        assert response.json()["messages"][1] == {"role": "assistant", "content": "4", "reasoning_content": "I know."}


def test_tool_choice_defaults_as_openais(client: TestClient) -> None:
    assert chat(client).json()["chosen"] == "none"
    assert chat(client, tools=[ADD]).json()["chosen"] == "auto"
    assert (
        chat(client, tools=[ADD], tool_choice={"type": "function", "function": {"name": "add"}}).json()["chosen"]
        == "named"
    )
    assert chat(client, tool_choice="auto").status_code == 200  # nothing to call: changes nothing
    assert chat(client, tools=[STRICT]).json()["chosen"] == "auto"  # strict under "auto": the grammar holds it


STRICT = {**ADD, "function": {**ADD["function"], "strict": True}}
NOT_AN_OBJECT = {"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}
BAD_SCHEMA = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": 5}}}
UNKNOWN_TYPE = {
    "type": "function",
    "function": {"name": "f", "parameters": {"type": "object", "properties": {"x": {"type": "integr"}}}},
}
# fields -> (param, words of the message)
BAD: dict[str, tuple[dict[str, Any], str, str]] = {
    "a name with a space": (
        {"tools": [{"type": "function", "function": {"name": "add two"}}]},
        "tools.0.function.name",
        "letters, digits, underscores or dashes",
    ),
    "a function offered twice": ({"tools": [ADD, ADD]}, "tools.1.function.name", "offered twice"),
    "parameters of another type": ({"tools": [NOT_AN_OBJECT]}, "tools.0.function.parameters", "object schema"),
    "parameters that do not compile": (
        {"tools": [BAD_SCHEMA]},
        "tools.0.function.parameters",
        "function 'f': not a JSON schema the grammar engine compiles: properties must be an object",
    ),
    "an unknown JSON type": ({"tools": [UNKNOWN_TYPE]}, "tools.0.function.parameters", 'Unsupported type "integr"'),
    "a tool of another type": (
        {"tools": [{"type": "web_search"}]},
        "tools",
        "tools.0.type: Input should be 'function'",
    ),
    "naming a function not offered": (
        {"tools": [ADD], "tool_choice": {"type": "function", "function": {"name": "divide"}}},
        "tool_choice.function.name",
        "not among the tools offered (offered: add)",
    ),
    "required without tools": ({"tool_choice": "required"}, "tool_choice", "no tools are offered"),
    "a result answering no call": ({"messages": [USER, RESULT]}, "messages.1.tool_call_id", "answers no tool call"),
    "a result before its call": ({"messages": [USER, RESULT, CALLING]}, "messages.1.tool_call_id", "earlier"),
    "a result without its call's id": (
        {"messages": [USER, CALLING, {"role": "tool", "content": "4"}]},
        "messages.2.tool_call_id",
        "id of the call",
    ),
    "a result without content": (
        {"messages": [USER, CALLING, {"role": "tool", "tool_call_id": "call_1"}]},
        "messages.2.content",
        "result",
    ),
    "calls on a user message": ({"messages": [{**USER, "tool_calls": [CALL]}]}, "messages.0.tool_calls", "assistant"),
    "a call id on a user message": (
        {"messages": [{**USER, "tool_call_id": "call_1"}]},
        "messages.0.tool_call_id",
        "tool message",
    ),
    "reasoning on a user message": (
        {"messages": [{**USER, "reasoning_content": "x"}]},
        "messages.0.reasoning_content",
        "assistant",
    ),
    "reasoning by its other name on a user message": (
        {"messages": [{**USER, "reasoning": "x"}]},
        "messages.0.reasoning",
        "assistant",
    ),
    "two different reasonings": (
        {"messages": [USER, {"role": "assistant", "content": "4", "reasoning_content": "a", "reasoning": "b"}]},
        "messages.1.reasoning",
        "differs from reasoning_content",
    ),
    "arguments that are not JSON": (
        {"messages": [USER, {**CALLING, "tool_calls": [{**CALL, "function": {"name": "add", "arguments": "{a: 2"}}]}]},
        "messages.1.tool_calls.0.function.arguments",
        "not JSON",
    ),
    "arguments that are a list": (
        {"messages": [USER, {**CALLING, "tool_calls": [{**CALL, "function": {"name": "add", "arguments": "[2, 2]"}}]}]},
        "messages.1.tool_calls.0.function.arguments",
        "a JSON object",
    ),
    "a parse that is not of the arguments": (
        {
            "messages": [
                USER,
                {**CALLING, "tool_calls": [{**CALL, "function": {**CALL["function"], "parsed_arguments": {}}}]},
            ]
        },
        "messages.1.tool_calls.0.function.parsed_arguments",
        "differs",
    ),
    "the legacy functions": ({"functions": [ADD["function"]]}, "functions", "send them as tools"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_tool_fields_that_cannot_be_served_are_a_400_naming_the_field(client: TestClient, name: str) -> None:
    """Reverse-verified: without `check_tool_results`, the two results answering no call were
    served (200); without the compile check of `FunctionDefinition`, the schemas the grammar
    engine refuses were served."""
    fields, param, words = BAD[name]
    assert words in refused(chat(client, **fields), param)


def test_tokenize_renders_tools_with_messages_only(client: TestClient) -> None:
    assert client.post("/tokenize", json={"messages": [USER], "tools": [ADD]}).json() == {"tools": [ADD]}
    refused(client.post("/tokenize", json={"prompt": "Hi", "tools": [ADD]}), "tools")
    assert client.post("/tokenize", json={"messages": [USER], "tools": [STRICT]}).status_code == 200
