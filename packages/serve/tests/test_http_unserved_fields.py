"""Request fields the server does not act on, refused with a 400 naming them, on a real FastAPI app
with the server's request models and error handlers (the served routes are covered end to end in
tests/test_e2e_bad_input_http.py): every entry of the table of `serve.http.unserved_fields` is
refused when set and accepted at its no-op values, metadata is accepted, unknown names are
refused with their close matches, and chat messages carry only what the template renders (the
tool-calling fields a chat request serves are pinned in test_http_tool_fields.py)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from serve.http.errors import install_error_handlers
from serve.http.protocol import ChatCompletionRequest, CompletionRequest, DetokenizeBody, GenerateBody, TokenizeBody
from serve.http.responses_request import ResponsesRequest
from serve.http.unserved_fields import (
    CHAT_FIELDS,
    COMPLETION_FIELDS,
    GENERATE_FIELDS,
    MESSAGE_FIELDS,
    RESPONSES_CALL_FIELDS,
    RESPONSES_FIELDS,
    RESPONSES_MESSAGE_FIELDS,
    RESPONSES_OUTPUT_FIELDS,
    RESPONSES_REASONING_FIELDS,
    RESPONSES_REASONING_ITEM_FIELDS,
    RESPONSES_TEXT_FIELDS,
    RESPONSES_TEXT_PART_FIELDS,
    SAMPLING_FIELDS,
    STREAM_OPTION_FIELDS,
    TOKENIZE_FIELDS,
    TOOL_CALL_FIELDS,
    Decision,
    Metadata,
    Refused,
)


def _app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest) -> dict[str, Any]:
        return body.model_dump()

    @app.post("/v1/chat/completions")
    async def chat(body: ChatCompletionRequest) -> dict[str, Any]:
        return {**body.model_dump(), "rendered": [m.template_message() for m in body.messages]}

    @app.post("/generate")
    async def generate(body: GenerateBody) -> dict[str, Any]:
        return body.model_dump()

    @app.post("/tokenize")
    async def tokenize(body: TokenizeBody) -> dict[str, Any]:
        return body.model_dump()

    @app.post("/v1/responses")
    async def responses(body: ResponsesRequest) -> dict[str, Any]:
        return body.model_dump()

    @app.post("/detokenize")
    async def detokenize(body: DetokenizeBody) -> dict[str, Any]:
        return body.model_dump()

    return app


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    with TestClient(_app(), raise_server_exceptions=False) as c:
        yield c


USER = {"role": "user", "content": "Hi"}


def completion(**fields: Any) -> tuple[str, dict[str, Any]]:
    return "/v1/completions", {"prompt": "Hi", **fields}


def chat(**fields: Any) -> tuple[str, dict[str, Any]]:
    return "/v1/chat/completions", {"messages": [USER], **fields}


def message(**fields: Any) -> tuple[str, dict[str, Any]]:
    return "/v1/chat/completions", {"messages": [USER, {"role": "assistant", "content": "Hello", **fields}]}


def tool_call(**fields: Any) -> tuple[str, dict[str, Any]]:
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}, **fields}
    return "/v1/chat/completions", {"messages": [USER, {"role": "assistant", "tool_calls": [call]}]}


def sampling(**fields: Any) -> tuple[str, dict[str, Any]]:
    return "/generate", {"text": "Hi", "sampling_params": fields}


def generate(**fields: Any) -> tuple[str, dict[str, Any]]:
    return "/generate", {"text": "Hi", **fields}


def tokenize(**fields: Any) -> tuple[str, dict[str, Any]]:
    return "/tokenize", {"messages": [USER], **fields}


def stream_options(**fields: Any) -> tuple[str, dict[str, Any]]:
    return "/v1/completions", {"prompt": "Hi", "stream": True, "stream_options": fields}


def responses(**fields: Any) -> tuple[str, dict[str, Any]]:
    return "/v1/responses", {"input": "Hi", **fields}


def responses_text(**fields: Any) -> tuple[str, dict[str, Any]]:
    return "/v1/responses", {"input": "Hi", "text": {"format": {"type": "text"}, **fields}}


def responses_reasoning(**fields: Any) -> tuple[str, dict[str, Any]]:
    return "/v1/responses", {"input": "Hi", "reasoning": fields}


CALL_ITEM = {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"}


def message_item(**fields: Any) -> tuple[str, dict[str, Any]]:
    return "/v1/responses", {"input": [USER, {"type": "message", "role": "assistant", "content": "Hello", **fields}]}


def call_item(**fields: Any) -> tuple[str, dict[str, Any]]:
    return "/v1/responses", {"input": [USER, {**CALL_ITEM, **fields}]}


def output_item(**fields: Any) -> tuple[str, dict[str, Any]]:
    result = {"type": "function_call_output", "call_id": "call_1", "output": "1", **fields}
    return "/v1/responses", {"input": [USER, CALL_ITEM, result]}


def reasoning_item(**fields: Any) -> tuple[str, dict[str, Any]]:
    return "/v1/responses", {"input": [USER, {"type": "reasoning", "content": [], **fields}]}


def text_part(**fields: Any) -> tuple[str, dict[str, Any]]:
    return "/v1/responses", {"input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi", **fields}]}]}


# Each table, the request that carries one of its fields, and the path the refusal names.
TABLES = {
    "completions": (COMPLETION_FIELDS, completion, ""),
    "chat": (CHAT_FIELDS, chat, ""),
    "chat message": (MESSAGE_FIELDS, message, "messages.1."),
    "chat message's tool call": (TOOL_CALL_FIELDS, tool_call, "messages.1.tool_calls.0."),
    "generate sampling_params": (SAMPLING_FIELDS, sampling, "sampling_params."),
    "generate": (GENERATE_FIELDS, generate, ""),
    "tokenize": (TOKENIZE_FIELDS, tokenize, ""),
    "stream_options": (STREAM_OPTION_FIELDS, stream_options, "stream_options."),
    "responses": (RESPONSES_FIELDS, responses, ""),
    "responses text": (RESPONSES_TEXT_FIELDS, responses_text, "text."),
    "responses reasoning": (RESPONSES_REASONING_FIELDS, responses_reasoning, "reasoning."),
    "responses message item": (RESPONSES_MESSAGE_FIELDS, message_item, "input.1."),
    "responses function_call item": (RESPONSES_CALL_FIELDS, call_item, "input.1."),
    "responses function_call_output item": (RESPONSES_OUTPUT_FIELDS, output_item, "input.2."),
    "responses reasoning item": (RESPONSES_REASONING_ITEM_FIELDS, reasoning_item, "input.1."),
    "responses text part": (RESPONSES_TEXT_PART_FIELDS, text_part, "input.0.content.0."),
}
SET = {"set to": "something that acts"}  # no field's no-op value


def _entries(kind: type[Refused] | type[Metadata]) -> list[tuple[str, str]]:
    return [
        (table, name)
        for table, (fields, _, _) in TABLES.items()
        for name, decision in fields.items()
        if isinstance(decision, kind)
    ]


def _decision(table: str, name: str) -> Decision:
    return TABLES[table][0][name]


def sent(client: TestClient, request: tuple[str, dict[str, Any]]) -> Any:
    path, body = request
    return client.post(path, json=body)


def _refusal(response: Any, param: str) -> str:
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    assert error["param"] == param and error["message"].startswith(f"{param}: "), error
    message: str = error["message"]
    return message


@pytest.mark.parametrize(("table", "name"), _entries(Refused))
def test_every_unserved_field_is_refused_when_set_and_served_at_its_no_op_values(
    client: TestClient, table: str, name: str
) -> None:
    """Reverse-verified: with `served_fields` keeping every undeclared field, each set value
    answered pydantic's "Extra inputs are not permitted" (no reason, no accepted values), and every
    no-op value was refused the same way."""
    decision = _decision(table, name)
    assert isinstance(decision, Refused)
    _, request, prefix = TABLES[table]
    message = _refusal(sent(client, request(**{name: SET})), prefix + name)
    assert f"not supported here: this server does not {decision.would}" in message and "something that acts" in message
    for value in decision.no_op:
        response = sent(client, request(**{name: value}))
        assert response.status_code == 200, (value, response.text)
        assert name not in _keys(response.json()), "a no-op field was kept"


@pytest.mark.parametrize(("table", "name"), _entries(Metadata))
def test_metadata_is_served_with_any_value(client: TestClient, table: str, name: str) -> None:
    _, request, _ = TABLES[table]
    for value in ("end-user-7", {"team": "a"}, None):
        response = sent(client, request(**{name: value}))
        assert response.status_code == 200, response.text
        assert name not in _keys(response.json())


def _keys(answer: Any) -> set[str]:
    """Every key anywhere in a JSON answer."""
    if isinstance(answer, Mapping):
        return set(answer) | {k for v in answer.values() for k in _keys(v)}
    if isinstance(answer, list):
        return {k for v in answer for k in _keys(v)}
    return set()


# What an OpenAI, vLLM or SGLang user sends to ask for something this server does not do. Written
# out, not drawn from the table: an entry dropped from the table turns its refusal into "unknown
# field" and its no-op value into a refusal, and these fail.
ASKED = {
    "best_of": completion(best_of=3),
    "best_of above n": completion(best_of=3, n=2),
    "echo": completion(echo=True),
    "suffix": completion(suffix="!"),
    "completion tools": completion(tools=[{"type": "function", "function": {"name": "f", "parameters": {}}}]),
    "completion tool_choice": completion(tool_choice="required"),
    "functions": chat(functions=[{"name": "f", "parameters": {}}]),
    "function_call": chat(function_call="auto"),
    "completion parallel_tool_calls": completion(parallel_tool_calls="yes"),
    "audio": chat(audio={"voice": "alloy", "format": "wav"}),
    "modalities": chat(modalities=["text", "audio"]),
    "prediction": chat(prediction={"type": "content", "content": "x"}),
    "web_search_options": chat(web_search_options={}),
    "reasoning_effort": completion(reasoning_effort="low"),
    "store": chat(store=True),
    "service_tier": chat(service_tier="priority"),
    "min_tokens": completion(min_tokens=5),
    "guided_decoding_backend": chat(guided_decoding_backend="outlines", guided_regex="a+"),
    "structured_outputs whitespace_pattern": chat(structured_outputs={"regex": "a+", "whitespace_pattern": " "}),
    "generate use_beam_search": sampling(use_beam_search=True),
    "add_generation_prompt": chat(add_generation_prompt=False),
    "chat add_special_tokens": chat(add_special_tokens=True),
    "completion add_special_tokens": completion(add_special_tokens=False),
    "generate image_data": generate(image_data="https://example.com/cat.png"),
    "stream_options continuous_usage_stats": stream_options(continuous_usage_stats=True),
}
PARAM = {
    "completion tools": "tools",
    "completion tool_choice": "tool_choice",
    "completion parallel_tool_calls": "parallel_tool_calls",
    "best_of above n": "best_of",
    "chat add_special_tokens": "add_special_tokens",
    "completion add_special_tokens": "add_special_tokens",
}
PARAM |= {
    "generate use_beam_search": "sampling_params.use_beam_search",
    "structured_outputs whitespace_pattern": "structured_outputs.whitespace_pattern",
    "generate image_data": "image_data",
}
PARAM |= {"stream_options continuous_usage_stats": "stream_options.continuous_usage_stats"}


@pytest.mark.parametrize("name", list(ASKED))
def test_a_field_asking_for_what_the_server_does_not_do_is_refused(client: TestClient, name: str) -> None:
    """Reverse-verified: with `RequestObject` ignoring undeclared fields (`extra="ignore"`, the
    table unread, as `SamplingFields` did before), every case here answered 200."""
    message = _refusal(sent(client, ASKED[name]), PARAM.get(name, name))
    assert "not supported here: this server does not" in message and "accepted only as" in message


NO_OPS = {
    "logit_bias": None, "functions": None, "function_call": "none", "user": "x",
    "metadata": {"k": "v"}, "stream_options": None, "best_of": 1, "echo": False,
    "store": False, "service_tier": "auto", "modalities": ["text"], "audio": None,
    "reasoning_effort": None, "add_generation_prompt": True, "chat_template_kwargs": {},
}  # fmt: skip


def test_the_no_op_values_clients_send_change_nothing(client: TestClient) -> None:
    """A chat request with the no-op values SDKs send parses to exactly the plain request.

    Reverse-verified: with `Refused.is_no_op` answering False, the request was refused at
    tools."""
    plain = sent(client, chat(temperature=0))
    assert plain.status_code == 200
    noisy = sent(client, chat(temperature=0, **NO_OPS))
    assert noisy.status_code == 200, noisy.text
    assert noisy.json() == plain.json()


def test_a_no_op_is_a_json_value_not_a_python_one(client: TestClient) -> None:
    """`0 == False` in Python; in JSON 0 is not false, so `echo: 0` is no no-op.

    Reverse-verified: with `_same_json` as plain `==`, `echo: 0` answered 200."""
    assert "got 0" in _refusal(sent(client, completion(echo=0)), "echo")
    assert sent(client, completion(best_of=2, n=2)).status_code == 200  # best_of equal to n asks for nothing


def test_a_misspelt_field_names_its_close_match(client: TestClient) -> None:
    """Reverse-verified: with `RequestObject` ignoring undeclared fields (`extra="ignore"`, as
    `SamplingFields` did before), `temprature` answered 200 and parsed to temperature 1."""
    message = _refusal(sent(client, completion(temprature=0.2)), "temprature")
    assert "unknown field, not supported here; did you mean temperature?" in message
    assert "did you mean max_tokens" in _refusal(sent(client, chat(max_token=5)), "max_token")
    nested = _refusal(sent(client, sampling(max_new_token=5)), "sampling_params.max_new_token")
    assert "did you mean max_new_tokens" in nested


def test_an_unknown_field_without_a_close_match_lists_the_accepted_ones(client: TestClient) -> None:
    message = _refusal(sent(client, completion(flavour="vanilla")), "flavour")
    assert (
        "the fields accepted here are model, max_tokens," in message and "user" in message and "best_of" not in message
    )
    assert "text, input_ids, sampling_params" in _refusal(sent(client, generate(bogus=1)), "bogus")
    assert "fields accepted here are model, tokens" in _refusal(
        client.post("/detokenize", json={"tokens": [1], "flavour": 1}), "flavour"
    )
    assert "did you mean messages" in _refusal(sent(client, tokenize(message=[USER])), "message")


@pytest.mark.parametrize(
    ("part", "kind"),
    [
        ({"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}, "image_url"),
        ({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}, "input_audio"),
        ({"type": "file", "file": {"file_id": "file-1"}}, "file"),
    ],
)
def test_content_parts_other_than_text_are_refused_by_their_type(
    client: TestClient, part: dict[str, Any], kind: str
) -> None:
    """Reverse-verified: without `_text_part`'s type check, the part was refused for its payload
    field ("messages.0.content.1.image_url: unknown field"), naming neither its type nor text-only."""
    content = [{"type": "text", "text": "What is this?"}, part]
    body = {"messages": [{"role": "user", "content": content}]}
    message = _refusal(client.post("/v1/chat/completions", json=body), "messages.0.content.1.type")
    assert f"content part type {kind!r} is not supported here: this server serves a text-only model" in message
    tokenized = client.post("/tokenize", json=body)  # /tokenize renders messages the same way
    assert tokenized.json()["error"]["param"] == "messages.0.content.1.type"


def test_a_text_part_carries_only_its_text(client: TestClient) -> None:
    body = {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}]}
        ]
    }
    assert "unknown field" in _refusal(
        client.post("/v1/chat/completions", json=body), "messages.0.content.0.cache_control"
    )


def test_message_fields_the_template_never_sees_are_refused(client: TestClient) -> None:
    """The template is given role, content, tool calls and reasoning: a message's name is refused,
    and served at its empty value.

    Reverse-verified: with `ChatMessage` back on `extra="allow"` (its table unread), it answered
    200 and the name was dropped on the way to the template."""
    assert "participant's name" in _refusal(sent(client, message(name="bob")), "messages.1.name")
    served = sent(client, message(name=None, tool_calls=[], refusal=None))
    assert served.status_code == 200 and served.json()["rendered"][1] == {"role": "assistant", "content": "Hello"}


def test_a_developer_message_is_rendered_as_the_system_message(client: TestClient) -> None:
    """Reverse-verified: with `template_message` giving the role as sent, the template was given
    `developer`, a role the served models' templates do not know."""
    body = {"messages": [{"role": "developer", "content": "Be brief."}, USER]}
    assert client.post("/v1/chat/completions", json=body).json()["rendered"] == [
        {"role": "system", "content": "Be brief."},
        USER,
    ]


def test_a_usage_chunk_needs_a_stream(client: TestClient) -> None:
    """Reverse-verified: without `_usage_chunk_needs_a_stream`, the request answered 200 and its
    stream_options were ignored."""
    message = _refusal(sent(client, completion(stream_options={"include_usage": True})), "stream_options")
    assert "not streamed" in message
    assert sent(client, completion(stream_options={"include_usage": False})).status_code == 200
    assert sent(client, completion(stream=True, stream_options={"include_usage": True})).status_code == 200


def test_top_logprobs_needs_logprobs(client: TestClient) -> None:
    """Reverse-verified: without `_top_logprobs_needs_logprobs`, the request answered 200 and no
    logprobs came back."""
    assert "logprobs: true" in _refusal(sent(client, chat(top_logprobs=3)), "top_logprobs")
    assert sent(client, chat(top_logprobs=3, logprobs=True)).status_code == 200
    assert sent(client, chat(top_logprobs=0)).status_code == 200


def test_tokenizing_messages_adds_no_special_tokens(client: TestClient) -> None:
    """Reverse-verified: without `_messages_add_no_special_tokens`, `add_special_tokens: true` with
    messages answered 200 and the rendered prompt was encoded without them all the same."""
    assert "the chat template writes its special tokens" in _refusal(
        sent(client, tokenize(add_special_tokens=True)), "add_special_tokens"
    )
    assert sent(client, tokenize(add_special_tokens=False)).status_code == 200
    assert client.post("/tokenize", json={"prompt": "Hi", "add_special_tokens": True}).status_code == 200


def test_sampling_params_carry_no_stream_fields(client: TestClient) -> None:
    """/generate streams by its top-level `stream`; one inside sampling_params was ignored before.

    Reverse-verified: with `stream` back in `SamplingFields`, the request answered 200."""
    assert "unknown field" in _refusal(sent(client, sampling(stream=True)), "sampling_params.stream")


def test_null_means_the_default_for_a_field_that_has_one(client: TestClient) -> None:
    """OpenAI's API takes null for "the default", and clients send it for unset fields.
    Reverse-verified: without the null filter in RequestObject, `temperature: null` was a 400
    ("Input should be a valid number"); a required field sent as null is still refused by name."""
    nulls = {"temperature": None, "top_p": None, "n": None, "presence_penalty": None, "stop": None, "seed": None}
    served = client.post("/v1/completions", json={"prompt": "x", **nulls})
    assert served.status_code == 200, served.text
    body = served.json()
    assert (body["temperature"], body["top_p"], body["n"], body["presence_penalty"], body["seed"]) == (
        1.0,
        1.0,
        1,
        0.0,
        None,
    )
    refused = client.post("/v1/completions", json={"prompt": None})
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "prompt", refused.text
