"""The request-body size limit (serving.max_request_body_mb, read per request): a larger body is
answered 413 in OpenAI's shape before it is read whole.

A declared Content-Length over the limit is refused before any of the body is read; a body
without one (chunked) is counted as it streams and refused at the first chunk past the limit.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from config_bags.server import get_serving
from serve.http.errors import APIError

_MIB = 1024 * 1024


class BodyTooLargeError(Exception):
    """Raised into the app from `receive` once a streamed body passed the limit."""


def body_limit_bytes() -> int:
    """The largest request body accepted now, in bytes."""
    return get_serving().max_request_body_mb * _MIB


def too_large(size: str, limit: int) -> APIError:
    """The 413 answered for a body of `size` (in words) over `limit` bytes."""
    return APIError(
        413,
        f"the request body is {size}, over this server's limit of {limit} bytes ({limit // _MIB} MiB, "
        "serving.max_request_body_mb); "
        "send a smaller request",
        code="request_too_large",
    )


def declared_length(scope: Scope) -> int | None:
    """The request's Content-Length, None when it has none or it is not a number (the server's
    HTTP parser refuses a malformed one before the app runs)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None


class BodySizeLimit:
    """ASGI middleware enforcing `body_limit_bytes()` on every HTTP request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = body_limit_bytes()
        declared = declared_length(scope)
        if declared is not None and declared > limit:
            await too_large(f"{declared} bytes", limit).response()(scope, receive, send)
            return
        received = 0
        over = False

        async def counted() -> Message:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    over = True
                    raise BodyTooLargeError
            return message

        async def unless_over(message: Message) -> None:
            # Whatever the app answers to the interrupted read (FastAPI makes it a 400) is dropped.
            if not over:
                await send(message)

        try:
            await self.app(scope, counted, unless_over)
        except BodyTooLargeError:
            pass
        if over:
            await too_large(f"more than {limit} bytes", limit).response()(scope, receive, send)
