"""The API's error shapes and authentication on a real FastAPI app with the server's handlers
(the routes that need the model are covered end to end in tests/test_e2e_errors.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import config_bags
from config_bags.server import Bags, ServingBag
from serve.http.auth import install_auth
from serve.http.errors import APIError, install_error_handlers
from serve.http.protocol import ChatCompletionRequest, CompletionRequest
from serve.tokenizer.worker import TokenizerWorkerDiedError


def _app() -> FastAPI:
    app = FastAPI()
    install_error_handlers(app)
    install_auth(app)

    @app.post("/v1/completions")
    async def completions(body: CompletionRequest) -> dict[str, Any]:
        return {"lengths": body.length_fields(), "stop": list(body.stop_strings())}

    @app.post("/v1/chat/completions")
    async def chat(body: ChatCompletionRequest) -> dict[str, Any]:
        return {"text": [m.text() for m in body.messages]}

    @app.get("/refuse")
    async def refuse() -> None:
        raise APIError(400, "no such thing", param="thing", code="nope")

    @app.get("/crash")
    async def crash() -> None:
        raise RuntimeError("boom")

    @app.get("/tokenizer-died")
    async def tokenizer_died() -> None:
        raise TokenizerWorkerDiedError("the tokenizer worker process died while serving this request")

    @app.get("/health")
    async def health() -> dict[str, str]:
        return {"status": "ok"}

    return app


@pytest.fixture
def client() -> Iterator[TestClient]:
    config_bags.publish(Bags(), role="http")
    with TestClient(_app(), raise_server_exceptions=False) as c:
        yield c
    config_bags.unpublish()


def _error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    return error


def test_malformed_json_is_a_400(client: TestClient) -> None:
    error = _error(client.post("/v1/completions", content=b"{nope", headers={"content-type": "application/json"}), 400)
    assert error["message"].startswith("malformed JSON body") and error["type"] == "invalid_request_error"


def test_wrong_type_names_the_field_and_value(client: TestClient) -> None:
    error = _error(client.post("/v1/completions", json={"prompt": "x", "temperature": "hot"}), 400)
    assert error["param"] == "temperature" and "'hot'" in error["message"]


def test_a_refused_megabyte_is_not_echoed_whole(client: TestClient) -> None:
    """A long list the prompt's union refuses fails once per element and per member: the message
    names the first few failures, each input cut short.

    Reverse-verified: without the cap on parts (each input already cut by `shown`), the message
    was 86 MB."""
    error = _error(client.post("/v1/completions", json={"prompt": [1, "x"] * 250_000}), 400)
    assert error["param"] == "prompt" and len(error["message"]) < 2000 and error["message"].endswith("more")


def test_a_body_sent_as_another_content_type_names_it(client: TestClient) -> None:
    """Reverse-verified: without the content-type clause the message was "body: Input should be a
    valid dictionary ... (got b'...')", naming neither JSON nor the content type."""
    error = _error(
        client.post("/v1/completions", content=b'{"prompt": "x"}', headers={"content-type": "text/plain"}), 400
    )
    assert "Content-Type: application/json" in error["message"] and "'text/plain'" in error["message"]


def test_protocol_accepts_openai_and_native_spellings(client: TestClient) -> None:
    assert client.post("/v1/completions", json={"prompt": "x", "max_new_tokens": 5, "stop": "\n"}).json() == {
        "lengths": {"max_new_tokens": 5},
        "stop": ["\n"],
    }
    parts = {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]}
    assert client.post("/v1/chat/completions", json=parts).json() == {"text": ["ab"]}
    _error(client.post("/v1/chat/completions", json={"messages": [{"role": "robot", "content": "x"}]}), 400)


def test_api_error_and_crash_shapes(client: TestClient) -> None:
    """A route that is not here is a 404, and a method a route does not serve a 405, in OpenAI's
    shape naming the method and path (pydantic-ai reports a bare "Not Found" as a missing model).

    Reverse-verified: with the HTTP handler answering `err.detail` alone, the message was "Not
    Found" and the path assertion failed."""
    assert _error(client.get("/refuse"), 400) == {
        "message": "no such thing",
        "type": "invalid_request_error",
        "param": "thing",
        "code": "nope",
    }
    crash = _error(client.get("/crash"), 500)
    assert crash["type"] == "internal_server_error" and "boom" in crash["message"]
    missing = _error(client.post("/v1/missing"), 404)
    assert missing["type"] == "invalid_request_error" and "POST /v1/missing" in missing["message"]
    wrong = _error(client.get("/v1/completions"), 405)
    assert "GET /v1/completions" in wrong["message"] and "accepted: POST" in wrong["message"]
    died = _error(client.get("/tokenizer-died"), 503)
    assert died["code"] == "server_unavailable" and "tokenizer worker" in died["message"]


def test_api_key_is_read_at_request_time() -> None:
    """serving.api_key is read per request (published bags), and /health stays open."""
    config_bags.publish(Bags(serving=ServingBag(api_key="k1")), role="http")
    try:
        with TestClient(_app()) as c:
            assert c.get("/health").status_code == 200
            assert _error(c.get("/refuse"), 401)["code"] == "invalid_api_key"
            assert (
                _error(c.get("/refuse", headers={"Authorization": "Bearer k2"}), 401)["type"] == "authentication_error"
            )
            assert _error(c.get("/refuse", headers={"Authorization": "Bearer k1"}), 400)["code"] == "nope"
    finally:
        config_bags.unpublish()
