"""Bearer-token authentication: with serving.api_key set, every endpoint but /health and the web
pages' public files (serve.http.routes_web says why) needs it.

Plain ASGI middleware rather than `@app.middleware("http")`: starlette's BaseHTTPMiddleware relays
every chunk of a streamed body through an extra task and memory stream, a cost paid per token by
every streamed response (seen in a profile of the HTTP process under one stream)."""

from __future__ import annotations

import secrets

from fastapi import FastAPI
from starlette.types import ASGIApp, Receive, Scope, Send

from config_bags.server import get_serving
from serve.http.errors import APIError
from serve.http.routes_web import is_web_ui_path

OPEN_PATHS = frozenset({"/health"})


def authorization_of(scope: Scope) -> bytes:
    """The request's Authorization header, empty when it has none."""
    return next((value for name, value in scope["headers"] if name == b"authorization"), b"")


def _is_open(path: str) -> bool:
    return path in OPEN_PATHS or is_web_ui_path(path)


class BearerAuth:
    """Refuse (401) requests without `Authorization: Bearer <serving.api_key>` when a key is set
    (the key read per request, so an override takes effect on the next one)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = get_serving().api_key
        if scope["type"] == "http" and key is not None and not _is_open(scope["path"]):
            if not secrets.compare_digest(authorization_of(scope), f"Bearer {key}".encode()):
                refusal = APIError(
                    401,
                    "missing or wrong API key; send the header Authorization: Bearer <api key>",
                    type_="authentication_error",
                    code="invalid_api_key",
                )
                await refusal.response()(scope, receive, send)
                return
        await self.app(scope, receive, send)


def install_auth(app: FastAPI) -> None:
    """Check the API key on every request (see BearerAuth)."""
    app.add_middleware(BearerAuth)
