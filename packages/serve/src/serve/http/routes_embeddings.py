"""POST /v1/embeddings: OpenAI's embeddings endpoint over the served encoder or decoder (task embed)."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
from fastapi import APIRouter, Request

from serve.http.admission import check_model, check_token_ids, new_rid
from serve.http.embedding_dimensions import check_dimensions, truncated
from serve.http.embeddings_request import EmbeddingsBody, texts_or_ids, within_limit
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.served_name import served_model_name
from serve.tokenizer.worker import TokenizerWorker

router = APIRouter()


def _encoded(vector: bytes, encoding_format: str) -> list[float] | str:
    """One embedding as the request asked: floats, or its float32 bytes in base64 (OpenAI's)."""
    if encoding_format == "base64":
        return base64.b64encode(vector).decode("ascii")
    values: list[float] = np.frombuffer(vector, dtype="<f4").tolist()
    return values


@router.post("/v1/embeddings")
async def embeddings(body: EmbeddingsBody, http_request: Request) -> Any:
    """One embedding per input, with usage.prompt_tokens counting every input's tokens."""
    manager: TokenizerManager = http_request.app.state.manager
    worker: TokenizerWorker = http_request.app.state.tokenizer_worker
    check_model(body.model)
    info = manager.model_info
    check_dimensions(body.dimensions, info)
    texts, ids = texts_or_ids(body)
    from_text = texts is not None
    if texts is not None:
        ids = [list(encoded) for encoded in await worker.encode(texts)]
    assert ids is not None  # texts_or_ids gives one of the two
    inputs = []
    for index, one in enumerate(ids):
        check_token_ids(one, info.vocab_size, f"input[{index}]")
        inputs.append(within_limit(one, index, info.context_length, body.truncate_prompt_tokens, from_text))
    vectors = [
        truncated(vector, body.dimensions, info.embeddings_normalized)
        for vector in await manager.embed(new_rid(), tuple(inputs))
    ]
    tokens = sum(len(one) for one in inputs)
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": _encoded(vector, body.encoding_format)}
            for i, vector in enumerate(vectors)
        ],
        "model": served_model_name(),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
