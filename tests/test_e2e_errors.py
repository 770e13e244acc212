"""End to end: every bad input gets a 400 in OpenAI's error shape naming what was wrong, and the
server keeps serving; with --api-key every endpoint but /health needs the bearer token."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from serve_testing.server import ServerProcess
from serve_testing.tiny_checkpoint import build_tiny_checkpoint

pytestmark = pytest.mark.timeout(600)

KEY = "sk-test-key"
CONTEXT = 256
MODEL = "tiny-llama"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    model_dir = build_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / MODEL)
    running = ServerProcess(
        model_dir,
        "--api-key",
        KEY,
        "--context-length",
        str(CONTEXT),
        "--max-n",
        "4",
        "--max-total-tokens",
        "8192",
        "--device",
        "cpu",
    )
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=60, headers={"Authorization": f"Bearer {KEY}"}) as c:
        yield c


def assert_error(response: httpx.Response, status: int, *needles: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    for needle in needles:
        assert needle in error["message"], error
    return error


def still_serves(http: httpx.Client) -> None:
    response = http.post("/v1/completions", json={"model": MODEL, "prompt": "Hello", "max_tokens": 3, "temperature": 0})
    assert response.status_code == 200 and response.json()["usage"]["completion_tokens"] >= 1


def test_malformed_json(http: httpx.Client) -> None:
    response = http.post(
        "/v1/completions", content=b'{"prompt": "Hello", "max_tokens": ', headers={"content-type": "application/json"}
    )
    assert_error(response, 400, "malformed JSON")
    still_serves(http)


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"prompt": "Hello", "temperature": "hot"}, "temperature"),
        ({"prompt": "Hello", "max_tokens": -1}, "max_tokens"),
        ({"prompt": "Hello", "top_p": 1.5}, "top_p"),
        ({"prompt": 42}, "prompt"),
        ({"prompt": "Hello", "logprobs": 50}, "logprobs"),
        ({"max_tokens": 3}, "prompt"),
    ],
)
def test_wrong_types_and_ranges(http: httpx.Client, body: dict[str, Any], param: str) -> None:
    error = assert_error(http.post("/v1/completions", json=body), 400, param)
    assert error["param"] == param
    still_serves(http)


def test_max_tokens_beyond_the_context_names_both_counts(http: httpx.Client) -> None:
    prompt_tokens = http.post("/tokenize", json={"prompt": "Hello world"}).json()["count"]
    response = http.post("/v1/completions", json={"model": MODEL, "prompt": "Hello world", "max_tokens": CONTEXT})
    error = assert_error(
        response, 400, f"{prompt_tokens} in the prompt", f"is {CONTEXT} tokens", f"at most {CONTEXT - prompt_tokens}"
    )
    assert error["code"] == "context_length_exceeded"
    long_chat = [{"role": "user", "content": "glitters " * CONTEXT}]
    assert_error(
        http.post("/v1/chat/completions", json={"model": MODEL, "messages": long_chat}), 400, f"is {CONTEXT} tokens"
    )
    still_serves(http)


def test_unknown_model(http: httpx.Client) -> None:
    error = assert_error(http.post("/v1/completions", json={"model": "gpt-5", "prompt": "Hi"}), 400, "'gpt-5'", MODEL)
    assert error["code"] == "model_not_found"
    still_serves(http)


@pytest.mark.parametrize("prompt", ["", [], [""], [[]]])
def test_empty_prompt(http: httpx.Client, prompt: Any) -> None:
    assert_error(http.post("/v1/completions", json={"model": MODEL, "prompt": prompt}), 400, "empty")
    still_serves(http)


def test_empty_messages(http: httpx.Client) -> None:
    assert_error(http.post("/v1/chat/completions", json={"model": MODEL, "messages": []}), 400, "messages")


def test_n_above_max_n(http: httpx.Client) -> None:
    error = assert_error(
        http.post("/v1/completions", json={"model": MODEL, "prompt": "Hi", "n": 5}), 400, "n=5", "max_n", "1 to 4"
    )
    assert error["param"] == "n"
    still_serves(http)


def test_api_key_required_except_health(server: ServerProcess) -> None:
    """Reverse-verified: with the auth middleware not installed, the keyless requests got 200."""
    with httpx.Client(base_url=server.base_url, timeout=30) as anonymous:
        assert anonymous.get("/health").status_code == 200
        for method, path in (
            ("GET", "/v1/models"),
            ("GET", "/metrics"),
            ("GET", "/server_info"),
            ("POST", "/v1/completions"),
        ):
            assert_error(anonymous.request(method, path, json={"prompt": "Hi"}), 401, "API key")
        wrong = anonymous.get("/v1/models", headers={"Authorization": "Bearer nope"})
        assert_error(wrong, 401, "API key")
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key=KEY, max_retries=0)
    assert client.models.list().data[0].id == MODEL
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=server.base_url + "/v1", api_key="wrong", max_retries=0).models.list()


def test_openai_client_sees_bad_request(server: ServerProcess) -> None:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key=KEY, max_retries=0)
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model=MODEL, prompt="Hi", max_tokens=CONTEXT * 2)
    assert "context length" in str(caught.value)
