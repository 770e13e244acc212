"""Server-sent events framing for streamed responses."""

from __future__ import annotations

import json
from typing import Any

DONE = b"data: [DONE]\n\n"


def sse(payload: dict[str, Any]) -> bytes:
    """One `data:` event carrying `payload` as JSON."""
    return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"
