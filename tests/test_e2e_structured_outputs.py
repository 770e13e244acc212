"""End to end, structured outputs on the real default model (SmolLM2-135M-Instruct) through the
official `openai` client: `parse()` with a pydantic model, a strict JSON schema sampled with n=4,
a streamed schema, a regex, vLLM's choice, SGLang's EBNF on /generate, logit_bias banning and
forcing tokens, a constraint that cannot finish within max_tokens, and /metrics counting compiles
and cache hits. Every constrained output is checked by a validator that is not the grammar engine
(`jsonschema`, Python's `re`)."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import jsonschema
import pytest
from openai import OpenAI
from pydantic import BaseModel, Field

from serve_testing.polling import first_satisfying
from serve_testing.prometheus import metric_value
from serve_testing.server import ServerProcess

pytestmark = pytest.mark.timeout(600)

QUESTION = [{"role": "user", "content": "Describe the capital of France as JSON."}]
CITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "maxLength": 16},
        "country": {"type": "string", "maxLength": 16},
        "founded": {"type": "integer", "minimum": 0, "maximum": 2100},
        "capital": {"type": "boolean"},
    },
    "required": ["name", "country", "founded", "capital"],
    "additionalProperties": False,
}


class City(BaseModel):
    """What `parse()` asks for."""

    name: str = Field(max_length=16)
    country: str = Field(max_length=16)
    population_millions: int = Field(ge=0, le=40)


@pytest.fixture(scope="module")
def server(default_model_server: ServerProcess) -> ServerProcess:
    return default_model_server


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> OpenAI:
    return OpenAI(base_url=server.base_url + "/v1", api_key="unused", timeout=300, max_retries=0)


def test_parse_with_a_pydantic_model(client: OpenAI) -> None:
    """`client.chat.completions.parse` sends a strict json_schema and parses the answer into the model."""
    completion = client.chat.completions.parse(
        model="SmolLM2-135M-Instruct", messages=QUESTION, response_format=City, max_tokens=80, temperature=0
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "stop", choice
    assert isinstance(choice.message.parsed, City)
    jsonschema.validate(json.loads(choice.message.content or ""), City.model_json_schema())


def test_a_strict_schema_sampled_four_times_always_validates(client: OpenAI) -> None:
    completion = client.chat.completions.create(
        model="SmolLM2-135M-Instruct",
        messages=QUESTION,
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": CITY_SCHEMA, "strict": True}},
        n=4,
        temperature=1.0,
        seed=7,
        max_tokens=80,
    )
    assert len(completion.choices) == 4
    for choice in completion.choices:
        assert choice.finish_reason == "stop", choice
        jsonschema.validate(json.loads(choice.message.content or ""), CITY_SCHEMA)


def test_a_streamed_schema_validates_once_assembled(client: OpenAI) -> None:
    stream = client.chat.completions.create(
        model="SmolLM2-135M-Instruct",
        messages=QUESTION,
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": CITY_SCHEMA}},
        max_tokens=80,
        temperature=0,
        stream=True,
    )
    pieces, finishes = [], []
    for chunk in stream:
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            finishes.append(choice.finish_reason)
    assert finishes[-1] == "stop"
    jsonschema.validate(json.loads("".join(pieces)), CITY_SCHEMA)


def test_json_object_answers_an_object(client: OpenAI) -> None:
    completion = client.chat.completions.create(
        model="SmolLM2-135M-Instruct",
        messages=QUESTION,
        response_format={"type": "json_object"},
        max_tokens=200,
        temperature=0,
    )
    choice = completion.choices[0]
    if choice.finish_reason == "stop":
        assert isinstance(json.loads(choice.message.content or ""), dict)
    else:  # an open object may run past the budget; what came is a prefix of one
        assert (choice.message.content or "").startswith("{")


def test_a_regex_constrains_a_completion(client: OpenAI) -> None:
    pattern = r"(yes|no), because [a-z ]{1,30}\."
    completion = client.completions.create(
        model="SmolLM2-135M-Instruct",
        prompt="Is Paris in France? Answer:",
        max_tokens=40,
        temperature=0.8,
        seed=3,
        n=2,
        extra_body={"regex": pattern},
    )
    for choice in completion.choices:
        assert choice.finish_reason == "stop", choice
        assert re.fullmatch(pattern, choice.text), choice.text


def test_a_vllm_choice_picks_one_of_the_strings(client: OpenAI) -> None:
    choices = ["Paris", "Lyon", 'Marseille "old port"']
    completion = client.chat.completions.create(
        model="SmolLM2-135M-Instruct",
        messages=[{"role": "user", "content": "Which city is the capital of France?"}],
        max_tokens=10,
        temperature=0,
        extra_body={"structured_outputs": {"choice": choices}},
    )
    assert completion.choices[0].message.content in choices
    assert completion.choices[0].finish_reason == "stop"


def test_an_ebnf_grammar_on_generate(server: ServerProcess) -> None:
    grammar = 'root ::= "The answer is " digit digit? "."\ndigit ::= [0-9]'
    response = httpx.post(
        server.base_url + "/generate",
        json={
            "text": "What is 6 times 7?",
            "sampling_params": {"ebnf": grammar, "max_new_tokens": 16, "temperature": 0},
        },
        timeout=300,
    )
    assert response.status_code == 200, response.text
    assert re.fullmatch(r"The answer is [0-9][0-9]?\.", response.json()["text"])


def test_a_constraint_that_cannot_finish_in_budget_ends_by_length(client: OpenAI) -> None:
    completion = client.chat.completions.create(
        model="SmolLM2-135M-Instruct",
        messages=QUESTION,
        response_format={"type": "json_schema", "json_schema": {"name": "city", "schema": CITY_SCHEMA}},
        max_tokens=3,
        temperature=0,
    )
    choice = completion.choices[0]
    assert choice.finish_reason == "length"
    assert (choice.message.content or "").startswith("{")  # then a key, or the whitespace before it


def _generated_ids(server: ServerProcess, **sampling: Any) -> list[int]:
    response = httpx.post(
        server.base_url + "/generate",
        json={
            "text": "The capital of France is",
            "sampling_params": {"max_new_tokens": 6, "temperature": 0, **sampling},
        },
        timeout=300,
    )
    assert response.status_code == 200, response.text
    ids: list[int] = response.json()["output_ids"]
    return ids


def test_logit_bias_bans_and_forces_tokens(server: ServerProcess, client: OpenAI) -> None:
    """-100 bans the token greedy decoding picks first; +100 makes greedy pick the biased token
    every step (the official client sends the bias map as is)."""
    plain = _generated_ids(server)
    banned = _generated_ids(server, logit_bias={str(plain[0]): -100})
    assert banned[0] != plain[0]
    forced = client.completions.create(
        model="SmolLM2-135M-Instruct",
        prompt="The capital of France is",
        max_tokens=4,
        temperature=0,
        logit_bias={"28": 100},
        logprobs=1,
    )
    tokens = forced.choices[0].logprobs
    assert tokens is not None and tokens.tokens is not None
    assert len(set(tokens.tokens)) == 1, tokens.tokens


def test_metrics_count_compiles_and_cache_hits(server: ServerProcess, client: OpenAI) -> None:
    """A schema sent twice compiles once; the second is a cache hit (the scheduler reports its
    counts a few times a second, so they are read until they move)."""

    def counts() -> tuple[float, float, float]:
        text = httpx.get(server.base_url + "/metrics", timeout=30).text
        return (
            metric_value(text, "serve_grammar_compiles_total"),
            metric_value(text, "serve_grammar_cache_hits_total"),
            metric_value(text, "serve_grammar_compile_seconds_total"),
        )

    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    body: dict[str, Any] = {"json_schema": {"name": "ok", "schema": schema}, "type": "json_schema"}
    compiles, hits, seconds = counts()
    for _ in range(2):
        client.chat.completions.create(
            model="SmolLM2-135M-Instruct",
            messages=QUESTION,
            response_format=body,
            max_tokens=10,
            temperature=0,  # type: ignore[arg-type]
        )
    after = first_satisfying(counts, lambda c: c[1] > hits)
    assert after[0] == compiles + 1 and after[1] == hits + 1 and after[2] > seconds, (compiles, hits, after)
