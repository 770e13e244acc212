"""End to end, the HTTP part of the bad-input battery: one real server (the tiny checkpoint, a
256-token context, n up to 4, a 1 MiB body limit) takes every case of a table of bad inputs over
every endpoint and answers each with a 4xx in OpenAI's error shape naming what was wrong; after
the battery it is healthy, serves a greedy request exactly as before, has the same config hash
and scheduler pid, and counts no failed request. The battery includes request fields the server
does not act on (a completion's tools, legacy functions, images, misspellings...), each refused with its path
as the param; the no-op values clients send for them are served exactly as without. Also here: oversize
bodies refused before they are read, /health answering while a prompt just under the limit is
tokenized, and /server_info telling the live config after a PATCH."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from http.client import HTTPResponse
from typing import Any

import httpx
import pytest

from serve_testing.prometheus import metric_value
from serve_testing.server import ServerProcess
from serve_testing.tiny_checkpoint import build_tiny_checkpoint

pytestmark = pytest.mark.timeout(600)

MODEL = "tiny-llama"
CONTEXT = 256
MAX_N = 4
VOCAB = 384  # the tiny checkpoint's trained tokenizer
LIMIT = 1024 * 1024  # --max-request-body-mb 1
BIG = 2**64  # above every 64-bit integer
HOT = "http:PATCH /v1/runtime_config"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    model_dir = build_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / MODEL)
    flags = (
        "--context-length",
        str(CONTEXT),
        "--max-n",
        str(MAX_N),
        "--max-total-tokens",
        "8192",
        "--max-request-body-mb",
        "1",
    )
    running = ServerProcess(model_dir, *flags, "--device", "cpu", "--dtype", "float32")
    try:
        running.wait_ready(timeout_s=300)
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=120) as c:
        yield c


def metric(http: httpx.Client, name: str) -> float:
    return metric_value(http.get("/metrics").text, name)


GREEDY = {"model": MODEL, "prompt": "The quick brown fox", "max_tokens": 8, "temperature": 0, "ignore_eos": True}


@dataclass(frozen=True)
class Snapshot:
    """What must be the same after the battery as before it."""

    info: dict[str, Any]
    greedy: list[str]
    aborted: float


def snapshot(http: httpx.Client) -> Snapshot:
    info = http.get("/server_info").json()
    response = http.post("/v1/completions", json=GREEDY)
    assert response.status_code == 200, response.text
    return Snapshot(
        info=info,
        greedy=[c["text"] for c in response.json()["choices"]],
        aborted=metric(http, "serve_requests_aborted_total"),
    )


@pytest.fixture(scope="module")
def before(http: httpx.Client) -> Snapshot:
    return snapshot(http)


@dataclass(frozen=True)
class Case:
    """One bad request and what its answer must name."""

    method: str
    path: str
    body: Any  # JSON-able, or bytes sent as they are
    names: str  # must appear in the error's message or be its param
    status: int = 400
    headers: dict[str, str] = field(default_factory=lambda: {"content-type": "application/json"})
    param: str | None = None  # when given, the error's param must be exactly this


def completion(**fields: Any) -> dict[str, Any]:
    return {"model": MODEL, "prompt": "Hello", "max_tokens": 4, **fields}


def chat(**fields: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": "Hello"}], **fields}


def generate(**sampling: Any) -> dict[str, Any]:
    return {"text": "Hello", "sampling_params": {"max_new_tokens": 4, **sampling}}


def user_parts(part: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "text", "text": "What is this?"}, part]}


def responses(**fields: Any) -> dict[str, Any]:
    return {"model": MODEL, "input": "Hello", "max_output_tokens": 4, **fields}


USER = {"role": "user", "content": "Hello"}
RESPONSES_TOOL = {"type": "function", "name": "add", "parameters": {"type": "object", "properties": {}}}
TOOL = {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}
BROKEN_TOOL = {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": 5}}}
CALLS = [{"id": "c1", "type": "function", "function": {"name": "add", "arguments": "{}"}}]
IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}
AUDIO = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
FILE = {"type": "file", "file": {"file_id": "file-1"}}


CASES: dict[str, Case] = {
    # /v1/completions: numbers the runtime cannot hold
    "top_k above 64 bits": Case("POST", "/v1/completions", completion(temperature=1.0, top_k=2**63), "top_k"),
    "top_k above the vocabulary": Case("POST", "/v1/completions", completion(top_k=VOCAB + 1), "top_k"),
    "top_k zero": Case("POST", "/v1/completions", completion(top_k=0), "top_k"),
    "top_k below -1": Case("POST", "/v1/completions", completion(top_k=-2), "top_k"),
    "seed above 64 bits": Case("POST", "/v1/completions", completion(seed=BIG), "seed"),
    "seed below 64 bits": Case("POST", "/v1/completions", completion(seed=-(2**63) - 1), "seed"),
    "seed plus choice above 64 bits": Case("POST", "/v1/completions", completion(seed=2**63 - 1, n=2), "seed"),
    "stop token id above 64 bits": Case("POST", "/v1/completions", completion(stop_token_ids=[BIG]), "stop_token_ids"),
    "stop token id outside the vocabulary": Case(
        "POST", "/v1/completions", completion(stop_token_ids=[VOCAB]), "stop_token_ids"
    ),
    "negative stop token id": Case("POST", "/v1/completions", completion(stop_token_ids=[-1]), "stop_token_ids"),
    "negative prompt id": Case("POST", "/v1/completions", completion(prompt=[5, -1]), "prompt"),
    "prompt id outside the vocabulary": Case("POST", "/v1/completions", completion(prompt=[5, VOCAB]), "prompt"),
    "prompt id above 64 bits": Case("POST", "/v1/completions", completion(prompt=[5, BIG]), "prompt"),
    "max_tokens zero": Case("POST", "/v1/completions", completion(max_tokens=0), "max_tokens"),
    "max_tokens above 64 bits": Case("POST", "/v1/completions", completion(max_tokens=BIG), "max_tokens"),
    "max_tokens beyond the context": Case("POST", "/v1/completions", completion(max_tokens=CONTEXT + 44), "max_tokens"),
    "max_new_tokens beyond the context": Case(
        "POST", "/v1/completions", {"prompt": "Hello", "max_new_tokens": CONTEXT}, "max_new_tokens"
    ),
    "two different lengths": Case("POST", "/v1/completions", completion(max_new_tokens=5), "max_new_tokens"),
    "n zero": Case("POST", "/v1/completions", completion(n=0), "n"),
    "n above max_n": Case("POST", "/v1/completions", completion(n=MAX_N + 1), "max_n"),
    "n above 64 bits": Case("POST", "/v1/completions", completion(n=BIG), "n"),
    # /v1/completions: wrong types and ranges
    "temperature not a number": Case("POST", "/v1/completions", completion(temperature="hot"), "temperature"),
    "temperature above 2": Case("POST", "/v1/completions", completion(temperature=3), "temperature"),
    "temperature NaN": Case("POST", "/v1/completions", b'{"prompt": "Hello", "temperature": NaN}', "temperature"),
    "repetition_penalty infinite": Case(
        "POST", "/v1/completions", b'{"prompt": "Hello", "repetition_penalty": 1e999}', "repetition_penalty"
    ),
    "top_p zero": Case("POST", "/v1/completions", completion(top_p=0), "top_p"),
    "presence_penalty above 2": Case("POST", "/v1/completions", completion(presence_penalty=2.5), "presence_penalty"),
    "min_p negative": Case("POST", "/v1/completions", completion(min_p=-0.1), "min_p"),
    "logprobs above 20": Case("POST", "/v1/completions", completion(logprobs=21), "logprobs"),
    "stop not a string": Case("POST", "/v1/completions", completion(stop=5), "stop"),
    "unknown model": Case("POST", "/v1/completions", completion(model="gpt-5"), "model"),
    "empty prompt": Case("POST", "/v1/completions", completion(prompt=""), "prompt"),
    "empty prompt list": Case("POST", "/v1/completions", completion(prompt=[]), "prompt"),
    "no prompt": Case("POST", "/v1/completions", {"max_tokens": 3}, "prompt"),
    "prompt a number": Case("POST", "/v1/completions", completion(prompt=42), "prompt"),
    # /v1/completions: bodies that are not a request
    "malformed JSON": Case("POST", "/v1/completions", b'{"prompt": "Hello", "max_tokens": ', "malformed JSON"),
    "body an array": Case("POST", "/v1/completions", [1, 2], "body"),
    "body a string": Case("POST", "/v1/completions", "Hello", "body"),
    "wrong content type": Case(
        "POST", "/v1/completions", b'{"prompt": "Hello"}', "Content-Type", headers={"content-type": "text/plain"}
    ),
    "body over the limit": Case(
        "POST", "/v1/completions", completion(prompt="a" * LIMIT), "max_request_body_mb", status=413
    ),
    # /v1/chat/completions
    "no messages": Case("POST", "/v1/chat/completions", chat(messages=[]), "messages"),
    "unknown role": Case(
        "POST", "/v1/chat/completions", chat(messages=[{"role": "robot", "content": "x"}]), "messages"
    ),
    "max_completion_tokens beyond the context": Case(
        "POST", "/v1/chat/completions", chat(max_completion_tokens=CONTEXT), "max_completion_tokens"
    ),
    "max_completion_tokens zero": Case(
        "POST", "/v1/chat/completions", chat(max_completion_tokens=0), "max_completion_tokens"
    ),
    "top_logprobs above 20": Case("POST", "/v1/chat/completions", chat(logprobs=True, top_logprobs=21), "top_logprobs"),
    "chat seed not a number": Case("POST", "/v1/chat/completions", chat(seed="abc"), "seed"),
    "chat top_k above 64 bits": Case("POST", "/v1/chat/completions", chat(top_k=BIG), "top_k"),
    "conversation beyond the context": Case(
        "POST", "/v1/chat/completions", chat(messages=[{"role": "user", "content": "glitters " * CONTEXT}]), "messages"
    ),
    "chat unknown model": Case("POST", "/v1/chat/completions", chat(model="gpt-5"), "model"),
    # /generate
    "neither text nor ids": Case("POST", "/generate", {"sampling_params": {"max_new_tokens": 4}}, "text"),
    "both text and ids": Case("POST", "/generate", {"text": "Hi", "input_ids": [5]}, "text"),
    "empty text": Case("POST", "/generate", {"text": ""}, "text"),
    "input id outside the vocabulary": Case("POST", "/generate", {"input_ids": [5, VOCAB]}, "input_ids"),
    "generate top_k above 64 bits": Case("POST", "/generate", generate(temperature=1.0, top_k=2**63), "top_k"),
    "generate seed above 64 bits": Case("POST", "/generate", generate(seed=BIG), "seed"),
    "generate stop token id above 64 bits": Case("POST", "/generate", generate(stop_token_ids=[BIG]), "stop_token_ids"),
    "generate max_new_tokens beyond the context": Case(
        "POST", "/generate", generate(max_new_tokens=CONTEXT), "max_new_tokens"
    ),
    "generate unknown field": Case("POST", "/generate", {"text": "Hi", "bogus": 1}, "unknown field", param="bogus"),
    "top_logprobs_num above 20": Case("POST", "/generate", {"text": "Hi", "top_logprobs_num": 21}, "top_logprobs_num"),
    # /tokenize and /detokenize
    "tokenize nothing": Case("POST", "/tokenize", {}, "prompt"),
    "tokenize unknown model": Case("POST", "/tokenize", {"model": "gpt-5", "prompt": "Hi"}, "model"),
    "tokenize a number": Case("POST", "/tokenize", {"prompt": 5}, "prompt"),
    "detokenize id outside the vocabulary": Case("POST", "/detokenize", {"tokens": [5, VOCAB]}, "tokens"),
    "detokenize negative id": Case("POST", "/detokenize", {"tokens": [-1]}, "tokens"),
    "detokenize id above 64 bits": Case("POST", "/detokenize", {"tokens": [BIG]}, "tokens"),
    "detokenize no tokens": Case("POST", "/detokenize", {}, "tokens"),
    "detokenize a string": Case("POST", "/detokenize", {"tokens": "abc"}, "tokens"),
    # fields the server does not act on: refused when set, named by their path
    "logit_bias key not a token id": Case(
        "POST", "/v1/completions", completion(logit_bias={"the": 5}), "is not a token id", param="logit_bias"
    ),
    "logit_bias key outside the vocabulary": Case(
        "POST", "/v1/completions", completion(logit_bias={str(VOCAB): 5}), f"0 to {VOCAB - 1}", param="logit_bias"
    ),
    "logit_bias above 100": Case("POST", "/v1/completions", completion(logit_bias={"5": 101}), "logit_bias"),
    "schema of an unknown type": Case(
        "POST",
        "/v1/chat/completions",
        chat(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "strin"}}}),
        'Unsupported type "strin"',
        param="response_format.json_schema.schema",
    ),
    "schema keyword not enforced": Case(
        "POST",
        "/v1/completions",
        completion(json_schema={"type": "array", "uniqueItems": True}),
        "'uniqueItems' at # (unique array items) is not enforced",
        param="json_schema",
    ),
    "regex unclosed": Case("POST", "/v1/completions", completion(regex="[a-"), "Unclosed '['", param="regex"),
    "two constraints": Case(
        "POST",
        "/v1/chat/completions",
        chat(response_format={"type": "json_object"}, guided_regex="a+"),
        "response_format and guided_regex each constrain the output",
        param="guided_regex",
    ),
    "best_of above n": Case("POST", "/v1/completions", completion(best_of=3), "equal to n (1)", param="best_of"),
    "echo the prompt": Case("POST", "/v1/completions", completion(echo=True), "not supported here", param="echo"),
    "suffix set": Case("POST", "/v1/completions", completion(suffix=" world"), "not supported here", param="suffix"),
    "misspelt temperature": Case(
        "POST", "/v1/completions", completion(temprature=0.2), "did you mean temperature", param="temprature"
    ),
    "tools in a completion": Case("POST", "/v1/completions", completion(tools=[TOOL]), "call tools", param="tools"),
    "a tool schema the grammar engine cannot compile": Case(
        "POST", "/v1/chat/completions", chat(tools=[BROKEN_TOOL]), "function 'add'", param="tools.0.function.parameters"
    ),
    "tool_choice required without tools": Case(
        "POST", "/v1/chat/completions", chat(tool_choice="required"), "no tools are offered", param="tool_choice"
    ),
    "functions set": Case(
        "POST", "/v1/chat/completions", chat(functions=[TOOL["function"]]), "not supported here", param="functions"
    ),
    "function_call auto": Case(
        "POST", "/v1/chat/completions", chat(function_call="auto"), "not supported here", param="function_call"
    ),
    "audio answer": Case(
        "POST",
        "/v1/chat/completions",
        chat(modalities=["text", "audio"], audio={"voice": "alloy"}),
        "not supported",
        param="modalities",
    ),
    "predicted output": Case(
        "POST",
        "/v1/chat/completions",
        chat(prediction={"type": "content", "content": "Hi"}),
        "not supported",
        param="prediction",
    ),
    "web search": Case(
        "POST", "/v1/chat/completions", chat(web_search_options={}), "search the web", param="web_search_options"
    ),
    "reasoning_effort without a reasoning parser": Case(
        "POST", "/v1/chat/completions", chat(reasoning_effort="high"), "reasoning parser", param="reasoning_effort"
    ),
    "thinking_budget without a reasoning parser": Case(
        "POST", "/v1/chat/completions", chat(thinking_budget=64), "reasoning parser", param="thinking_budget"
    ),
    "reasoning_effort of a completion": Case(
        "POST", "/v1/completions", completion(reasoning_effort="low"), "not supported here", param="reasoning_effort"
    ),
    "store true": Case("POST", "/v1/chat/completions", chat(store=True), "not supported here", param="store"),
    "service_tier priority": Case(
        "POST", "/v1/chat/completions", chat(service_tier="priority"), "not supported here", param="service_tier"
    ),
    "misspelt max_tokens": Case(
        "POST", "/v1/chat/completions", chat(max_token=4), "did you mean max_tokens", param="max_token"
    ),
    "top_logprobs without logprobs": Case(
        "POST", "/v1/chat/completions", chat(top_logprobs=2), "logprobs: true", param="top_logprobs"
    ),
    "usage chunk without a stream": Case(
        "POST",
        "/v1/completions",
        completion(stream_options={"include_usage": True}),
        "not streamed",
        param="stream_options",
    ),
    "user tool_calls": Case(
        "POST",
        "/v1/chat/completions",
        chat(messages=[{**USER, "tool_calls": CALLS}]),
        "only an assistant message carries tool calls",
        param="messages.0.tool_calls",
    ),
    "message name": Case(
        "POST", "/v1/chat/completions", chat(messages=[{**USER, "name": "bob"}]), "name", param="messages.0.name"
    ),
    "tool message": Case(
        "POST",
        "/v1/chat/completions",
        chat(messages=[USER, {"role": "tool", "tool_call_id": "c1", "content": "4"}]),
        "answers no tool call",
        param="messages.1.tool_call_id",
    ),
    "image part": Case(
        "POST",
        "/v1/chat/completions",
        chat(messages=[user_parts(IMAGE)]),
        "text-only model",
        param="messages.0.content.1.type",
    ),
    "audio part": Case(
        "POST",
        "/v1/chat/completions",
        chat(messages=[user_parts(AUDIO)]),
        "text-only model",
        param="messages.0.content.1.type",
    ),
    "file part": Case(
        "POST",
        "/v1/chat/completions",
        chat(messages=[user_parts(FILE)]),
        "text-only model",
        param="messages.0.content.1.type",
    ),
    "generate grammar of an undefined rule": Case(
        "POST",
        "/generate",
        generate(ebnf="root ::= greeting"),
        'Rule "greeting" is not defined',
        param="sampling_params.ebnf",
    ),
    "generate misspelt field": Case(
        "POST",
        "/generate",
        generate(max_new_token=4),
        "did you mean max_new_tokens",
        param="sampling_params.max_new_token",
    ),
    "generate image_data": Case(
        "POST", "/generate", {"text": "Hi", "image_data": "cat.png"}, "text-only model", param="image_data"
    ),
    "tokenize an image part": Case(
        "POST", "/tokenize", {"messages": [user_parts(IMAGE)]}, "text-only model", param="messages.0.content.1.type"
    ),
    "tokenize unknown field": Case(
        "POST", "/tokenize", {"prompt": "Hi", "add_bos": True}, "unknown field", param="add_bos"
    ),
    "detokenize unknown field": Case(
        "POST",
        "/detokenize",
        {"tokens": [5], "skip_special_tokens": False},
        "unknown field",
        param="skip_special_tokens",
    ),
    # PATCH /v1/runtime_config
    "override above 64 bits": Case(
        "PATCH", "/v1/runtime_config", {"max_running_requests": 10**30}, "max_running_requests"
    ),
    "override an array": Case("PATCH", "/v1/runtime_config", [1, 2], "body"),
    "override a string": Case("PATCH", "/v1/runtime_config", "max_n", "body"),
    "override null": Case("PATCH", "/v1/runtime_config", None, "body"),
    "override nested garbage": Case(
        "PATCH", "/v1/runtime_config", {"max_running_requests": {"a": [1, {"b": 2}]}}, "max_running_requests"
    ),
    "override a cold leaf": Case("PATCH", "/v1/runtime_config", {"page_size": 16}, "page_size"),
    "override a cold leaf beside a hot one": Case(
        "PATCH", "/v1/runtime_config", {"max_n": 3, "page_size": 2}, "page_size"
    ),
    "override an unknown leaf": Case("PATCH", "/v1/runtime_config", {"max_runing_requests": 4}, "max_runing_requests"),
    "override a hot leaf of an absent feature": Case(
        "PATCH", "/v1/runtime_config", {"mm_max_items_per_request": 2}, "mm_max_items_per_request"
    ),
    "override a chunk over the pool": Case(
        "PATCH", "/v1/runtime_config", {"chunked_prefill_size": 10**6}, "chunked_prefill_size"
    ),
    "override a bad value": Case("PATCH", "/v1/runtime_config", {"max_n": 0}, "max_n"),
    "override the body limit to zero": Case(
        "PATCH", "/v1/runtime_config", {"max_request_body_mb": 0}, "max_request_body_mb"
    ),
    "override nothing": Case("PATCH", "/v1/runtime_config", {}, "no leaves"),
    "override malformed JSON": Case("PATCH", "/v1/runtime_config", b'{"max_n": ', "malformed JSON"),
    # the Responses API
    "responses: unknown input item type": Case(
        "POST",
        "/v1/responses",
        responses(input=[{"type": "web_search_call", "id": "ws_1"}]),
        "web_search_call",
        param="input.0.type",
    ),
    "responses: input item without a type": Case(
        "POST", "/v1/responses", responses(input=[{"content": "Hello"}]), "names its type", param="input.0.type"
    ),
    "responses: web search tool": Case(
        "POST",
        "/v1/responses",
        responses(tools=[{"type": "web_search_preview"}]),
        "built-in tool 'web_search_preview'",
        param="tools.0.type",
    ),
    "responses: file search tool": Case(
        "POST",
        "/v1/responses",
        responses(tools=[RESPONSES_TOOL, {"type": "file_search", "vector_store_ids": ["v"]}]),
        "built-in tool 'file_search'",
        param="tools.1.type",
    ),
    "responses: computer use tool": Case(
        "POST",
        "/v1/responses",
        responses(
            tools=[{"type": "computer_use_preview", "display_width": 8, "display_height": 8, "environment": "linux"}]
        ),
        "built-in tool 'computer_use_preview'",
        param="tools.0.type",
    ),
    "responses: built-in tool_choice": Case(
        "POST",
        "/v1/responses",
        responses(tool_choice={"type": "web_search"}),
        "built-in tool 'web_search'",
        param="tool_choice.type",
    ),
    "responses: tool_choice naming no tool": Case(
        "POST",
        "/v1/responses",
        responses(tools=[RESPONSES_TOOL], tool_choice={"type": "function", "name": "sub"}),
        "'sub'",
        param="tool_choice.name",
    ),
    "responses: unknown previous_response_id": Case(
        "POST",
        "/v1/responses",
        responses(previous_response_id="resp_missing"),
        "resp_missing",
        status=404,
        param="previous_response_id",
    ),
    "responses: GET an unknown id": Case("GET", "/v1/responses/resp_missing", None, "resp_missing", status=404),
    "responses: DELETE an unknown id": Case("DELETE", "/v1/responses/resp_gone", None, "resp_gone", status=404),
    "responses: image part": Case(
        "POST",
        "/v1/responses",
        responses(
            input=[{"role": "user", "content": [{"type": "input_image", "image_url": "https://example.com/a.png"}]}]
        ),
        "input_image",
        param="input.0.content.0.type",
    ),
    "responses: misspelt field": Case("POST", "/v1/responses", responses(max_output_token=4), "max_output_tokens"),
    "responses: logit_bias key outside the vocabulary": Case(
        "POST", "/v1/responses", responses(logit_bias={str(VOCAB): 5}), f"0 to {VOCAB - 1}", param="logit_bias"
    ),
    "responses: seed beyond int64": Case("POST", "/v1/responses", responses(seed=2**63), "seed", param="seed"),
    "responses: unknown item field": Case(
        "POST", "/v1/responses", responses(input=[{**USER, "name": "ann"}]), "name", param="input.0.name"
    ),
    "responses: result answering no call": Case(
        "POST",
        "/v1/responses",
        responses(input=[{"type": "function_call_output", "call_id": "c9", "output": "1"}]),
        "c9",
        param="input.0.call_id",
    ),
    "responses: arguments not an object": Case(
        "POST",
        "/v1/responses",
        responses(input=[{"type": "function_call", "call_id": "c1", "name": "add", "arguments": "[1]"}]),
        "JSON object",
        param="input.0.arguments",
    ),
    "responses: encrypted reasoning": Case(
        "POST",
        "/v1/responses",
        responses(input=[{"type": "reasoning", "summary": [], "encrypted_content": "x"}]),
        "encrypted",
        param="input.0.encrypted_content",
    ),
    "responses: json_schema format without a schema": Case(
        "POST",
        "/v1/responses",
        responses(text={"format": {"type": "json_schema", "name": "x"}}),
        "schema",
        param="text.format",
    ),
    "responses: output over the context": Case(
        "POST", "/v1/responses", responses(max_output_tokens=CONTEXT), "max_output_tokens"
    ),
    "responses: empty input": Case("POST", "/v1/responses", responses(input=[]), "empty", param="input"),
    "responses: background": Case("POST", "/v1/responses", responses(background=True), "background"),
    # no such endpoint or method: OpenAI's shape, naming the method and path
    "unknown path": Case("GET", "/v1/engines", None, "GET /v1/engines", status=404),
    "unknown POST path": Case("POST", "/v1/assistants", {}, "POST /v1/assistants", status=404),
    "wrong method": Case("GET", "/v1/completions", None, "Method Not Allowed", status=405),
    "wrong method on responses": Case("PUT", "/v1/responses", {}, "PUT /v1/responses", status=405),
}


def sent(http: httpx.Client, case: Case) -> httpx.Response:
    if case.method in ("GET", "DELETE"):
        return http.request(case.method, case.path)
    content = case.body if isinstance(case.body, bytes) else json.dumps(case.body).encode()
    return http.request(case.method, case.path, content=content, headers=case.headers)


def test_the_battery_has_enough_distinct_cases() -> None:
    distinct = {(c.method, c.path, repr(c.body), repr(c.headers)) for c in CASES.values()}
    assert len(distinct) == len(CASES) >= 45


@pytest.mark.parametrize("name", list(CASES))
def test_bad_input_is_a_4xx_naming_what_was_wrong(http: httpx.Client, before: Snapshot, name: str) -> None:
    """Reverse-verified: with top_k's two bounds removed (the protocol's 64-bit one and the
    vocabulary check at admission), the three "top_k above 64 bits" cases answered 500 (the
    sampler's int64 overflow, or the IPC encode's for 2**64); without the body-limit middleware,
    "body over the limit" was tokenized into 1,048,576 tokens and answered 400 for the context
    length instead of 413; with `RequestObject` ignoring undeclared fields (`extra="ignore"`, as
    the sampling fields did before), "misspelt temperature", "tools in a completion" and
    "message name" were served (200), and the content-part cases were refused by pydantic's union
    without naming the part's type; with the Responses built-in tools not told apart from other
    tool types, the four built-in tool cases did not say "built-in tool", and with the input item
    types unchecked, "unknown input item type" was refused by pydantic's union without naming it."""
    case = CASES[name]
    response = sent(http, case)
    assert response.status_code == case.status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert case.names in error["message"] or error["param"] == case.names, error
    assert case.param is None or (error["param"] == case.param and error["message"].startswith(f"{case.param}: ")), (
        error
    )


# The no-op values SDKs and clients send for fields the server does not act on.
NO_OPS: dict[str, Any] = {
    "logit_bias": None, "tools": [], "tool_choice": "none", "functions": None, "user": "x", "metadata": {"run": "7"},
    "stream_options": None, "best_of": 1, "echo": False, "response_format": {"type": "text"},
    "parallel_tool_calls": True, "store": False, "service_tier": "auto", "reasoning_effort": None,
}  # fmt: skip


def test_the_no_op_values_clients_send_are_served_as_without(http: httpx.Client, before: Snapshot) -> None:
    """Completions, chat (with empty tool calls and no names on its messages), /generate and
    /tokenize answer with the no-op values exactly as without them, and a developer message is
    rendered as the system message.

    Reverse-verified: with `Refused.is_no_op` answering False, the completion with the no-op
    values answered 400 at tools."""
    noisy = http.post("/v1/completions", json={**GREEDY, **NO_OPS, "suffix": ""})
    assert noisy.status_code == 200, noisy.text
    assert [c["text"] for c in noisy.json()["choices"]] == before.greedy

    def chat_text(body: dict[str, Any]) -> str:
        response = http.post(
            "/v1/chat/completions", json={"model": MODEL, "max_tokens": 6, "temperature": 0, "ignore_eos": True, **body}
        )
        assert response.status_code == 200, response.text
        text: str = response.json()["choices"][0]["message"]["content"]
        return text

    conversation = [USER, {"role": "assistant", "content": "Hi"}, USER]
    quiet = [{**USER, "name": None}, {"role": "assistant", "content": "Hi", "tool_calls": [], "refusal": None}, USER]
    assert chat_text({"messages": quiet, **NO_OPS, "add_generation_prompt": True}) == chat_text(
        {"messages": conversation}
    )

    def generated(body: dict[str, Any]) -> list[int]:
        response = http.post("/generate", json=body)
        assert response.status_code == 200, response.text
        ids: list[int] = response.json()["output_ids"]
        return ids

    sampling = {"max_new_tokens": 6, "temperature": 0, "ignore_eos": True}
    plain = generated({"text": "Hello", "sampling_params": sampling})
    assert (
        generated(
            {
                "text": "Hello",
                "image_data": None,
                "sampling_params": {**sampling, "logit_bias": {}, "min_new_tokens": 0},
            }
        )
        == plain
    )

    def tokens(messages: list[dict[str, Any]], **fields: Any) -> list[int]:
        response = http.post("/tokenize", json={"messages": messages, **fields})
        assert response.status_code == 200, response.text
        ids: list[int] = response.json()["tokens"]
        return ids

    system = [{"role": "system", "content": "Be brief."}, USER]
    assert tokens(system, add_generation_prompt=True, tools=[]) == tokens(system)
    assert tokens([{"role": "developer", "content": "Be brief."}, USER]) == tokens(system)


def raw_response(port: int, head: bytes, body_chunks: Iterable[bytes] = ()) -> tuple[int, dict[str, Any]]:
    """Send a request head (and any body chunks) on a raw socket; the answer's status and JSON."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(head)
        for chunk in body_chunks:
            sock.sendall(chunk)
        answer = HTTPResponse(sock)
        answer.begin()
        return answer.status, json.loads(answer.read())


def test_a_declared_oversize_body_is_refused_before_it_is_sent(server: ServerProcess, before: Snapshot) -> None:
    """Only the head is sent, declaring 100 MB: the 413 comes back without a byte of body.

    Reverse-verified: without the Content-Length check the server waited for the body and the
    read timed out."""
    head = (
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100000000\r\n\r\n"
    )
    status, answer = raw_response(server.port, head)
    assert status == 413 and answer["error"]["code"] == "request_too_large"
    assert f"{100_000_000} bytes" in answer["error"]["message"]


def test_a_chunked_body_is_refused_as_it_passes_the_limit(server: ServerProcess, before: Snapshot) -> None:
    """17 chunks of 64 KiB (just past 1 MiB) and no final chunk: the 413 comes back anyway.

    Reverse-verified: without the body-limit middleware the server waited for the end of the
    body and the read timed out (the unit test in packages/serve/tests/test_http_body_limit.py
    reverse-verifies the counting alone)."""
    head = (
        b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"%x\r\n%s\r\n" % (65536, b"a" * 65536)
    status, answer = raw_response(server.port, head, iter([chunk] * 17))
    assert status == 413 and "more than 1048576 bytes" in answer["error"]["message"]


def test_after_the_battery_nothing_changed(http: httpx.Client, before: Snapshot) -> None:
    """Reverse-verified: with top_k's bounds removed, the battery's three top_k cases failed in
    the sampler and this test counted 3 failed requests."""
    assert http.get("/health").status_code == 200
    after = snapshot(http)
    assert after.greedy == before.greedy
    assert after.info["pids"]["scheduler"] == before.info["pids"]["scheduler"]
    assert after.info["config_hashes"] == before.info["config_hashes"]
    assert after.info["config"]["config_hash"] == before.info["config"]["config_hash"]
    assert after.info["bags"] == before.info["bags"] and after.info["overrides"] == before.info["overrides"] == []
    assert metric(http, "serve_requests_failed_total") == 0
    assert after.aborted == before.aborted, "a refused request was registered and left behind"


def test_health_answers_while_a_prompt_under_the_limit_is_tokenized(server: ServerProcess, http: httpx.Client) -> None:
    """A text prompt just under the 1 MiB limit takes the tokenizer a second or more; meanwhile
    no /health waits for it: each answers in well under half the big request's time (a blocked
    event loop makes one wait the whole encode; a loaded machine, once, made one take 0.44 s).

    Reverse-verified (under the first, 100 ms bound): with the completions route tokenizing on the
    event loop (`manager.tokenizer.encode`), one /health waited 0.86 s, the whole encode, which is
    most of the request's time and so also over this bound."""
    text = ("All that glitters is not gold. " * 40_000)[: LIMIT - 200]
    answers: list[httpx.Response] = []
    big = threading.Thread(
        target=lambda: answers.append(
            httpx.post(server.base_url + "/v1/completions", json={"prompt": text}, timeout=120)
        )
    )
    sent = time.monotonic()
    big.start()
    latencies: list[float] = []
    while big.is_alive():
        started = time.monotonic()
        assert http.get("/health").status_code == 200
        latencies.append(time.monotonic() - started)
        time.sleep(0.01)
    big.join()
    took = time.monotonic() - sent
    assert answers[0].status_code == 400 and answers[0].json()["error"]["code"] == "context_length_exceeded"
    assert max(latencies) < took / 2, (took, sorted(latencies)[-5:])
    assert len(latencies) >= 5, f"the prompt was tokenized too fast to measure anything ({len(latencies)} polls)"


def test_server_info_tells_the_live_config_after_a_patch(http: httpx.Client) -> None:
    """After a PATCH, /server_info's config hash and derived values are the new ones, every
    process (with its role) reports that hash, and the pool and queue state is there.

    Reverse-verified: with `ResolvedArgs.dump()` hashing and deriving from the resolved record,
    config.config_hash stayed the launch hash while every process reported the new one."""
    launched = http.get("/server_info").json()
    assert launched["config"]["derived"]["chunk_size"] == 256
    patched = http.patch("/v1/runtime_config", json={"chunked_prefill_size": 64})
    assert patched.status_code == 200, patched.text
    try:
        info = http.get("/server_info").json()
        new_hash = patched.json()["config_hash"]
        assert new_hash != launched["config"]["config_hash"]
        assert info["config"]["config_hash"] == new_hash
        assert info["config"]["derived"]["chunk_size"] == 64
        assert info["config"]["derived"]["max_prefill_buffer_tokens"] == max(
            64, launched["bags"]["schedule"]["max_prefill_tokens"]
        )
        assert info["provenance"]["chunked_prefill_size"] == f"override:{HOT}"
        processes = info["processes"]
        assert {name: p["role"] for name, p in processes.items()} == {
            "main": "http",
            "scheduler": "scheduler",
            "detokenizer": "detokenizer",
        }
        assert {p["config_hash"] for p in processes.values()} == {new_hash}
        assert {name: p["pid"] for name, p in processes.items()} == {
            k: v for k, v in info["pids"].items() if k in processes
        }
        pool = info["pool_and_queue"]
        assert pool["total_pages"] == 8192 and 0 < pool["free_pages"] <= pool["total_pages"]
        assert pool["running"] == 0 and pool["waiting"] == 0
    finally:
        restored = http.patch(
            "/v1/runtime_config", json={"chunked_prefill_size": launched["bags"]["schedule"]["chunked_prefill_size"]}
        )
        assert restored.status_code == 200 and restored.json()["config_hash"] == launched["config"]["config_hash"]
