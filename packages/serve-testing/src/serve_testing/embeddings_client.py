"""/v1/embeddings asked over plain HTTP for the exact bytes of each vector (base64, float32)."""

from __future__ import annotations

import base64
from typing import Any

import httpx


def embedded_bytes(http: httpx.Client, **fields: Any) -> list[bytes]:
    """Each input's embedding as float32 bytes, asked in base64; the request must succeed."""
    answer = http.post("/v1/embeddings", json={"encoding_format": "base64", **fields})
    assert answer.status_code == 200, answer.text
    return [base64.b64decode(item["embedding"]) for item in answer.json()["data"]]
