"""Smoke test on the real default model: `serve` with no model flag serves SmolLM2-135M-Instruct
(converted once from the bundled GGUF by the runner), answers a chat sensibly and makes the
README's forced tool call."""

from __future__ import annotations

import json

import httpx
import jsonschema
import pytest

from serve_testing.server import ServerProcess

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def server(default_model_server: ServerProcess) -> ServerProcess:
    return default_model_server


def test_default_model_answers_the_readme_question(server: ServerProcess) -> None:
    server.wait_announced(timeout_s=30)  # /health answers a moment before the line is printed
    assert "ready at http://127.0.0.1:" in server.log()
    body = {
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "max_tokens": 24,
        "temperature": 0,
    }
    response = httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=300)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["model"] == "SmolLM2-135M-Instruct"
    assert "Paris" in answer["choices"][0]["message"]["content"]
    assert answer["choices"][0]["finish_reason"] == "stop"


def test_default_model_answers_the_readme_tool_request(server: ServerProcess) -> None:
    """The README's forced tool call on the default model, whose chat template renders no tools:
    the grammar engine makes the answer a call of the function with arguments matching its schema
    (checked by jsonschema)."""
    parameters = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    body = {
        "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": parameters}}],
        "tool_choice": "required",
        "temperature": 0,
        "max_tokens": 64,
    }
    response = httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=300)
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    calls = choice["message"]["tool_calls"]
    assert calls  # "required" asks for one call or more (the default model writes this one twice)
    for call in calls:
        assert call["function"]["name"] == "get_weather"
        jsonschema.validate(json.loads(call["function"]["arguments"]), parameters)
