"""Smoke test on the real default model: `serve` with no model flag serves SmolLM2-135M-Instruct
(converted once from the bundled GGUF by the runner) and answers a chat sensibly."""

from __future__ import annotations

import httpx
import pytest

from serve.testing.server import ServerProcess

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
