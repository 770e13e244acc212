"""Server-sent events framing for streamed responses."""

from __future__ import annotations

import json
from typing import Any

DONE = b"data: [DONE]\n\n"


def sse(payload: dict[str, Any]) -> bytes:
    """One `data:` event carrying `payload` as JSON."""
    return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"


def sse_event(name: str, payload: dict[str, Any]) -> bytes:
    """One event named `name` (an `event:` line, as OpenAI's Responses stream has) carrying `payload`."""
    return f"event: {name}\n".encode() + sse(payload)
