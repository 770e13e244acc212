"""End to end, the Responses API (`POST /v1/responses`, GET and DELETE by id) on the real default
model through the official `openai` client: a string input and an item list with instructions
(each the same greedy answer as the chat completion of the same conversation), a stream the
client's stream helper assembles into the completed response with usage (a forced call's too),
`text.format` json_schema (checked by `jsonschema`), a forced function call answered with its
`function_call_output` (sent as items, and as a continuation), a `previous_response_id`
continuation whose prompt is the stored conversation (the prefix cache re-reads all but its last
token), and GET and DELETE. The bad-input battery of the endpoint is in
tests/test_e2e_bad_input_http.py."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import openai
import pytest

from serve_testing.server import ServerProcess

pytestmark = pytest.mark.timeout(600)

MODEL = "SmolLM2-135M-Instruct"
QUESTION = "What is the capital of France?"
GREEDY: dict[str, Any] = {"model": MODEL, "temperature": 0, "max_output_tokens": 24}
WEATHER = {
    "type": "object",
    "properties": {"city": {"type": "string", "enum": ["Paris", "Tokyo", "Lima"]}},
    "required": ["city"],
    "additionalProperties": False,
}
TOOLS: list[Any] = [{"type": "function", "name": "get_weather", "parameters": WEATHER, "strict": True}]


@pytest.fixture(scope="module")
def server(default_model_server: ServerProcess) -> ServerProcess:
    return default_model_server


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", timeout=300, max_retries=0)


def chat_answer(client: openai.OpenAI, messages: list[Any], max_tokens: int = 24) -> str:
    completion = client.chat.completions.create(model=MODEL, messages=messages, temperature=0, max_tokens=max_tokens)
    return completion.choices[0].message.content or ""


def test_a_string_and_an_item_list_answer_as_chat_does(client: openai.OpenAI) -> None:
    """A string input is one user message; an item list with instructions is the system message
    and the items, in order: each answer is the chat completion's of that conversation, with its
    usage.

    Reverse-verified: with the instructions left out of the chat messages, the item list's
    answer differed from the chat completion's (the template's default system prompt instead)."""
    plain = client.responses.create(input=QUESTION, **GREEDY)
    assert plain.status == "completed" and plain.object == "response" and plain.model == MODEL
    assert "Paris" in plain.output_text
    assert plain.output_text == chat_answer(client, [{"role": "user", "content": QUESTION}])
    (message,) = plain.output
    assert message.type == "message" and message.role == "assistant" and message.status == "completed"
    assert plain.usage is not None and plain.usage.input_tokens > 0 and 0 < plain.usage.output_tokens <= 24
    assert plain.usage.total_tokens == plain.usage.input_tokens + plain.usage.output_tokens

    items: list[Any] = [
        {"role": "user", "content": "Name a colour."},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Blue."}]},
        {"role": "user", "content": [{"type": "input_text", "text": "Name another one."}]},
    ]
    instructed = client.responses.create(input=items, instructions="You answer in one word.", **GREEDY)
    as_chat = [
        {"role": "system", "content": "You answer in one word."},
        {"role": "user", "content": "Name a colour."},
        {"role": "assistant", "content": "Blue."},
        {"role": "user", "content": "Name another one."},
    ]
    assert instructed.output_text == chat_answer(client, as_chat)
    assert instructed.instructions == "You answer in one word."


def test_seed_and_logit_bias_sample_as_chat_does(client: openai.OpenAI) -> None:
    """Chat's `seed` and `logit_bias`, sent to Responses as extensions, draw the same sample as
    the chat completion with the same fields, and another seed draws another.

    Reverse-verified: with the seed left out of the chat request a Responses request runs as,
    the seeded answers differed from chat's. (The bias here touches a token neither samples; the
    next test is the one a dropped bias fails.)"""
    answers = []
    for seed in (7, 8):
        extensions: dict[str, Any] = {"seed": seed, "logit_bias": {"0": -100}}
        messages: list[Any] = [{"role": "user", "content": QUESTION}]
        chat = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=24, extra_body=extensions)
        response = client.responses.create(model=MODEL, input=QUESTION, max_output_tokens=24, extra_body=extensions)
        assert response.output_text == chat.choices[0].message.content
        answers.append(response.output_text)
    assert answers[0] != answers[1]


def test_logit_bias_steers_a_response_as_it_steers_chat(client: openai.OpenAI, server: ServerProcess) -> None:
    """A bias of -100 on the greedy answer's first token turns a response off it, to the answer the
    chat completion gives under the same bias.

    Reverse-verified: with the Responses request's `logit_bias` left out of the chat request it runs
    as, the steered response was the plain one and the test failed."""
    plain = client.responses.create(input=QUESTION, **GREEDY).output_text
    tokens = httpx.post(server.base_url + "/tokenize", json={"prompt": plain, "add_special_tokens": False}, timeout=30)
    bias: dict[str, Any] = {"logit_bias": {str(tokens.json()["tokens"][0]): -100}}
    steered = client.responses.create(input=QUESTION, extra_body=bias, **GREEDY).output_text
    chat = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": QUESTION}], temperature=0, max_tokens=24, extra_body=bias
    )
    assert steered != plain and steered == chat.choices[0].message.content


def test_a_stream_parses_to_the_completed_response_with_usage(client: openai.OpenAI) -> None:
    """The client's stream helper accepts every event (it checks item ids and output indexes) and
    assembles the completed response, with usage, whose text is the whole response's; the events
    are numbered from 0 in order and run created, in_progress, the message's added events, its
    text deltas, their done events, completed."""
    whole = client.responses.create(input=QUESTION, **GREEDY)
    with client.responses.stream(input=QUESTION, **GREEDY) as stream:
        events = list(stream)
        final = stream.get_final_response()
    assert final.status == "completed" and final.output_text == whole.output_text
    assert final.usage is not None and final.usage.output_tokens == whole.usage.output_tokens  # type: ignore[union-attr]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    kinds = [e.type for e in events]
    deltas = kinds.count("response.output_text.delta")
    assert deltas >= 1
    assert kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        *["response.output_text.delta"] * deltas,
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == whole.output_text


def test_text_format_json_schema(client: openai.OpenAI) -> None:
    """`text.format` json_schema holds the answer to the schema (checked by jsonschema)."""
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string", "maxLength": 16}, "country": {"type": "string", "maxLength": 16}},
        "required": ["name", "country"],
        "additionalProperties": False,
    }
    response = client.responses.create(
        input="Describe the capital of France as JSON.",
        text={"format": {"type": "json_schema", "name": "city", "schema": schema, "strict": True}},
        model=MODEL,
        temperature=0,
        max_output_tokens=60,
    )
    assert response.status == "completed", response.output_text
    jsonschema.validate(json.loads(response.output_text), schema)
    assert response.text is not None and response.text.format.type == "json_schema"


def test_a_forced_call_and_its_result_round_trip(client: openai.OpenAI) -> None:
    """tool_choice naming the function (and "required") gives one `function_call` item whose
    arguments match the schema; its `function_call_output` sent back (as items, and as a
    continuation by previous_response_id) is answered with a message; a response whose last call was
    cut short by max_output_tokens is stored, but continuing it is a 400 naming previous_response_id
    (it was a 500: its call's arguments, not JSON, failed as it was stored; reverse-verified by
    storing it as before).

    Reverse-verified: with the chat request built without its tool_choice (so chat's default
    "auto"), the named call was not made: the request was refused at tools.0.strict, which only a
    forced call keeps."""
    named = client.responses.create(
        input="What is the weather in Paris?",
        tools=TOOLS,
        tool_choice={"type": "function", "name": "get_weather"},
        **GREEDY,
    )
    (call,) = named.output
    assert call.type == "function_call" and call.name == "get_weather" and call.call_id.startswith("call_")
    jsonschema.validate(json.loads(call.arguments), WEATHER)
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "Sunny, 24 C."}
    required = client.responses.create(
        input="What is the weather in Paris?", tools=TOOLS, tool_choice="required", parallel_tool_calls=False, **GREEDY
    )
    assert [item.type for item in required.output] == ["function_call"]
    # "required" alone asks for one call or more: the default model writes the call again, and the second is
    # cut by max_output_tokens; a continuation of that response is a 400, not a server error.
    cut = client.responses.create(input="What is the weather in Paris?", tools=TOOLS, tool_choice="required", **GREEDY)
    assert cut.status == "incomplete" and cut.output[-1].type == "function_call"
    with pytest.raises(openai.BadRequestError, match="ended inside a function call cut short"):
        client.responses.create(input=[result], previous_response_id=cut.id, tools=TOOLS, **GREEDY)

    as_items = client.responses.create(
        input=[
            {"role": "user", "content": "What is the weather in Paris?"},
            call.model_dump(exclude_unset=True),
            result,
        ],
        tools=TOOLS,
        tool_choice="none",
        **GREEDY,
    )
    assert [item.type for item in as_items.output] == ["message"] and as_items.output_text
    continued = client.responses.create(
        input=[result], previous_response_id=named.id, tools=TOOLS, tool_choice="none", **GREEDY
    )
    assert continued.output_text == as_items.output_text
    assert continued.previous_response_id == named.id


def test_a_streamed_call_parses_to_the_whole_call(client: openai.OpenAI) -> None:
    """Streamed, a forced call is an added function_call item, its arguments in deltas, their done
    event and the item's: the client's stream helper assembles the whole response's call."""
    body: dict[str, Any] = {
        **GREEDY,
        "input": "What is the weather in Paris?",
        "tools": TOOLS,
        "tool_choice": "required",
        "parallel_tool_calls": False,
        "max_output_tokens": 64,
    }
    whole = client.responses.create(**body)
    assert whole.status == "completed"
    with client.responses.stream(**body) as stream:
        events = list(stream)
        final = stream.get_final_response()
    (call,) = final.output
    assert call.type == "function_call" and whole.output[0].type == "function_call"
    assert (call.name, call.arguments) == (whole.output[0].name, whole.output[0].arguments)
    kinds = [e.type for e in events]
    deltas = kinds.count("response.function_call_arguments.delta")
    assert deltas >= 1 and kinds == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        *["response.function_call_arguments.delta"] * deltas,
        "response.function_call_arguments.done",
        "response.output_item.done",
        "response.completed",
    ]


def test_previous_response_id_continues_the_stored_conversation(client: openai.OpenAI) -> None:
    """A continuation's prompt is the stored input and output, then its own input: its answer is
    the one-shot request's of that conversation, and the prefix cache held all of the first
    turn's prompt and answer but the last token.

    Reverse-verified: with the stored conversation holding the input without the output, the
    continuation's answer differed from the one-shot request's."""
    first = client.responses.create(input=QUESTION, instructions="Answer briefly.", **GREEDY)
    second = client.responses.create(
        input="And of Spain?", instructions="Answer briefly.", previous_response_id=first.id, **GREEDY
    )
    items: list[Any] = [
        {"role": "user", "content": QUESTION},
        *(item.model_dump(exclude_unset=True) for item in first.output),
        {"role": "user", "content": "And of Spain?"},
    ]
    one_shot = client.responses.create(input=items, instructions="Answer briefly.", store=False, **GREEDY)
    assert second.output_text == one_shot.output_text
    assert first.usage is not None and second.usage is not None
    assert second.usage.input_tokens > first.usage.input_tokens + first.usage.output_tokens
    held = second.usage.input_tokens_details.cached_tokens
    assert held >= first.usage.input_tokens + first.usage.output_tokens - 1, (held, first.usage)


def test_get_and_delete(client: openai.OpenAI, server: ServerProcess) -> None:
    """GET answers the stored response as it was answered; DELETE answers OpenAI's deletion
    object, after which GET, DELETE and a continuation are 404s in OpenAI's shape; a response
    made with store false is never kept."""
    response = client.responses.create(input="Say hello.", **GREEDY)
    assert client.responses.retrieve(response.id).model_dump() == response.model_dump()
    deleted = httpx.delete(f"{server.base_url}/v1/responses/{response.id}", timeout=30)
    assert deleted.status_code == 200 and deleted.json() == {"id": response.id, "object": "response", "deleted": True}
    with pytest.raises(openai.NotFoundError) as gone:
        client.responses.retrieve(response.id)
    assert response.id in gone.value.message
    again = httpx.delete(f"{server.base_url}/v1/responses/{response.id}", timeout=30)
    assert again.status_code == 404 and set(again.json()["error"]) == {"message", "type", "param", "code"}
    with pytest.raises(openai.NotFoundError) as missing:
        client.responses.create(input="Go on.", previous_response_id=response.id, **GREEDY)
    assert missing.value.body["param"] == "previous_response_id"  # type: ignore[index]
    unstored = client.responses.create(input="Say hello.", store=False, **GREEDY)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(unstored.id)
