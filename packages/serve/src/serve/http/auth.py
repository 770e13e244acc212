"""Bearer-token authentication: with serving.api_key set, every endpoint but /health needs it."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response

from config_bags import get_serving
from serve.http.errors import APIError

OPEN_PATHS = frozenset({"/health"})


def install_auth(app: FastAPI) -> None:
    """Refuse (401) requests without `Authorization: Bearer <serving.api_key>` when a key is set."""

    @app.middleware("http")
    async def _check_key(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        key = get_serving().api_key
        if key is not None and request.url.path not in OPEN_PATHS:
            given = request.headers.get("authorization", "")
            if not secrets.compare_digest(given.encode(), f"Bearer {key}".encode()):
                return APIError(
                    401,
                    "missing or wrong API key; send the header Authorization: Bearer <api key>",
                    type_="authentication_error",
                    code="invalid_api_key",
                ).response()
        return await call_next(request)
