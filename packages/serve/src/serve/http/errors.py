"""Errors in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic_core import PydanticCustomError
from starlette.exceptions import HTTPException

from serve.tokenizer.worker import TokenizerWorkerDiedError

logger = logging.getLogger(__name__)

_MOST_PARTS = 5  # validation errors named in one message
_REFUSED_FIELD = "refused_field"  # the pydantic error type of `refused_field`


class APIError(Exception):
    """An error answered to the client; the server carries on."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        type_: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type_
        self.param = param
        self.code = code

    def body(self) -> dict[str, Any]:
        """The JSON body of the error."""
        return error_body(self.message, self.type, self.param, self.code)

    def response(self) -> JSONResponse:
        """The error as an HTTP response."""
        return JSONResponse(self.body(), status_code=self.status)


def error_body(message: str, type_: str, param: str | None = None, code: str | int | None = None) -> dict[str, Any]:
    """OpenAI's error object."""
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


def bad_request(message: str, param: str | None = None, code: str | None = None) -> APIError:
    """A 400 naming what was wrong."""
    return APIError(400, message, param=param, code=code)


def shown(value: Any, limit: int = 80) -> str:
    """`repr(value)`, cut to `limit` characters (a refused field may hold megabytes)."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def refused_field(field: str, message: str) -> PydanticCustomError:
    """A validation error refusing `field` (a dotted path below the object being validated),
    raised by a model's validator: answered as a 400 whose param is the field's whole path and
    whose message is that path, then `message`."""
    return PydanticCustomError(_REFUSED_FIELD, "{message}", {"field": field, "message": message})


def invalid_request(errors: Sequence[Any]) -> APIError:
    """The 400 of a model's validation errors (pydantic's `errors()`), as a request body's."""
    message, param = _validation_message(errors, None)
    return APIError(400, message, param=param)


def _validation_message(errors: Sequence[Any], content_type: str | None) -> tuple[str, str | None]:
    parts: list[str] = []
    param: str | None = None
    for detail in errors:
        loc = [str(p) for p in detail.get("loc", ()) if p != "body"]
        if detail.get("type") == _REFUSED_FIELD:
            where = ".".join([*loc, detail["ctx"]["field"]])
            param = param or where
            parts.append(f"{where}: {detail['msg']}")
            continue
        where = ".".join(loc) or "body"
        param = param or (loc[0] if loc else None)
        if not loc and isinstance(detail.get("input"), bytes):  # FastAPI parses JSON only when the content type says so
            parts.append(
                "the body must be a JSON object sent with Content-Type: application/json; got Content-Type "
                f"{content_type!r}"
            )
        elif detail.get("type") == "json_invalid":
            parts.append(f"malformed JSON body: {detail.get('ctx', {}).get('error', detail.get('msg'))}")
        else:
            parts.append(f"{where}: {detail.get('msg')} (got {shown(detail.get('input'))})")
    if len(parts) > _MOST_PARTS:  # a union over a long list fails once per element and per member
        parts = [*parts[:_MOST_PARTS], f"and {len(parts) - _MOST_PARTS} more"]
    return "; ".join(parts) or "invalid request", param


def _http_error_body(request: Request, err: HTTPException) -> dict[str, Any]:
    """An HTTP error in OpenAI's shape; a 404 or 405 from routing names the method and the path,
    so a client that reads only the message (pydantic-ai reports a bare 404 as a missing model)
    sees which route is not here."""
    path = request.url.path
    if err.status_code == 404 and err.detail == "Not Found":
        message = f"Not Found: no route {request.method} {path} on this server"
        return error_body(message, "invalid_request_error", code="not_found")
    if err.status_code == 405 and err.detail == "Method Not Allowed":
        allowed = (err.headers or {}).get("Allow") or (err.headers or {}).get("allow")
        accepted = f"; accepted: {allowed}" if allowed else ""
        message = f"Method Not Allowed: {request.method} {path} is not served{accepted}"
        return error_body(message, "invalid_request_error", code="method_not_allowed")
    return error_body(str(err.detail), "invalid_request_error")


def install_error_handlers(app: FastAPI) -> None:
    """Answer every error in OpenAI's shape: validation 400, HTTP errors with their status, a dead
    tokenizer worker 503, others 500."""

    @app.exception_handler(APIError)
    async def _api_error(_request: Request, err: APIError) -> JSONResponse:
        return err.response()

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, err: RequestValidationError) -> JSONResponse:
        message, param = _validation_message(err.errors(), request.headers.get("content-type"))
        return JSONResponse(error_body(message, "invalid_request_error", param), status_code=400)

    @app.exception_handler(TokenizerWorkerDiedError)
    async def _tokenizer_died(_request: Request, err: TokenizerWorkerDiedError) -> JSONResponse:
        return APIError(503, str(err), type_="server_error", code="server_unavailable").response()

    @app.exception_handler(HTTPException)
    async def _http(request: Request, err: HTTPException) -> JSONResponse:
        return JSONResponse(_http_error_body(request, err), status_code=err.status_code, headers=err.headers)

    @app.exception_handler(Exception)
    async def _internal(_request: Request, err: Exception) -> JSONResponse:
        logger.exception("unhandled error answering a request")
        return JSONResponse(error_body(f"internal server error: {err}", "internal_server_error"), status_code=500)
