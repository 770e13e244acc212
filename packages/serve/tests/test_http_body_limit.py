"""The request-body size limit on a real FastAPI app with the server's middleware and error
handlers: a declared or streamed body over serving.max_request_body_mb is a 413 in OpenAI's shape
and never reaches the endpoint; the limit is read per request, so an override moves it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

import config_bags
from config_bags.server import Bags, ServingBag
from serve.http.body_limit import BodySizeLimit
from serve.http.errors import install_error_handlers

MIB = 1024 * 1024


@pytest.fixture
def seen() -> list[int]:
    """The body sizes the endpoint received."""
    return []


@pytest.fixture
def client(seen: list[int]) -> Iterator[TestClient]:
    config_bags.publish(Bags(serving=ServingBag(max_request_body_mb=1)), role="http")
    app = FastAPI()
    install_error_handlers(app)
    app.add_middleware(BodySizeLimit)

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, int]:
        size = len(await request.body())
        seen.append(size)
        return {"size": size}

    with TestClient(app, raise_server_exceptions=False) as c:
        yield c
    config_bags.unpublish()


def streamed(size: int, chunk: int = 64 * 1024) -> Iterator[bytes]:
    """`size` bytes as a chunked body (no Content-Length)."""
    while size > 0:
        yield b"x" * min(chunk, size)
        size -= chunk


def refused(response: Any) -> str:
    assert response.status_code == 413, response.text
    error: dict[str, Any] = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["code"] == "request_too_large"
    assert "serving.max_request_body_mb" in error["message"]
    message: str = error["message"]
    return message


def test_a_declared_length_over_the_limit_is_refused_unread(client: TestClient, seen: list[int]) -> None:
    """Refused on the declared length, before any of the body is read (the end-to-end battery
    sends the headers alone and gets the 413).

    Reverse-verified: without the Content-Length check, the body was read until the count
    passed the limit and the message said "more than 1048576 bytes"."""
    assert "is 1048577 bytes" in refused(client.post("/echo", content=b"x" * (MIB + 1)))
    assert seen == []


def test_a_streamed_body_is_counted_as_it_arrives(client: TestClient, seen: list[int]) -> None:
    """Reverse-verified: without the counting receive, the 3 MiB chunked body reached the
    endpoint and was answered 200."""
    assert "more than 1048576 bytes" in refused(client.post("/echo", content=streamed(3 * MIB)))
    assert seen == []
    assert client.post("/echo", content=streamed(MIB)).json() == {"size": MIB}


def test_a_body_at_the_limit_is_served(client: TestClient, seen: list[int]) -> None:
    assert client.post("/echo", content=b"x" * MIB).json() == {"size": MIB}
    assert seen == [MIB]


def test_the_limit_follows_an_override(client: TestClient, seen: list[int]) -> None:
    """Reverse-verified: with the limit read once when the middleware was built, the 2 MiB
    body was still refused after the override."""
    refused(client.post("/echo", content=b"x" * (2 * MIB)))
    config_bags.override("test", max_request_body_mb=2)
    assert client.post("/echo", content=b"x" * (2 * MIB)).json() == {"size": 2 * MIB}
    assert seen == [2 * MIB]
