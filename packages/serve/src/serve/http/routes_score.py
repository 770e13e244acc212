"""POST /v1/score (also /score), vLLM's: a score of each (text_1, text_2) pair. `text_1` and
`text_2` are a text or lists of texts: one text_1 is paired with every text_2, else the two lists
pair up in order. On a cross-encoder (task rerank) a pair's score is the one /v1/rerank gives it;
on an embedding model (task embed) it is the cosine similarity of the two texts' embeddings, as
vLLM scores with an embedding model."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from fastapi import APIRouter, Request

from config_bags.server import get_model
from serve.http.admission import check_model, new_rid
from serve.http.embeddings_request import MAX_INPUTS
from serve.http.errors import bad_request
from serve.http.pair_scores import PairScores, pair_scores
from serve.http.request_object import RequestObject
from serve.http.unserved_fields import SCORE_FIELDS
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.served_name import served_model_name
from serve.tokenizer.worker import TokenizerWorker

router = APIRouter()


class ScoreBody(RequestObject):
    """The texts to pair and score."""

    unserved = SCORE_FIELDS

    model: str | None = None
    text_1: str | list[str]
    text_2: str | list[str]


def _texts(value: str | list[str], field: str) -> list[str]:
    texts = [value] if isinstance(value, str) else value
    if not texts or len(texts) > MAX_INPUTS:
        raise bad_request(f"{field} holds {len(texts)} texts; accepted: a text, or 1 to {MAX_INPUTS}", param=field)
    for index, text in enumerate(texts):
        if not text:
            name = field if isinstance(value, str) else f"{field}[{index}]"
            raise bad_request(f"{name} is an empty string; accepted: text to score", param=name)
    return texts


def score_pairs(body: ScoreBody) -> list[tuple[str, str]]:
    """The pairs the request asks scored; a 400 naming the field for an empty text or list, or
    lists that do not pair up."""
    firsts, seconds = _texts(body.text_1, "text_1"), _texts(body.text_2, "text_2")
    if len(firsts) == 1:
        firsts = firsts * len(seconds)
    elif len(firsts) != len(seconds):
        raise bad_request(
            f"text_1 holds {len(firsts)} texts and text_2 {len(seconds)}; accepted: one text_1 for every text_2, "
            "or as many of each (paired in order)",
            param="text_1",
        )
    return list(zip(firsts, seconds, strict=True))


async def _cosines(manager: TokenizerManager, worker: TokenizerWorker, pairs: list[tuple[str, str]]) -> PairScores:
    """Each pair's cosine similarity of the two texts' embeddings (each distinct text embedded once)."""
    texts = list(dict.fromkeys(text for pair in pairs for text in pair))
    limit = manager.model_info.context_length
    inputs = [tuple(ids) for ids in await worker.encode(texts)]
    for text, ids in zip(texts, inputs, strict=True):
        if len(ids) > limit:
            index = next(i for i, pair in enumerate(pairs) if text in pair)
            field = "text_1" if pairs[index][0] == text else "text_2"
            raise bad_request(
                f"the {field} of pair {index} holds {len(ids)} tokens, above this model's limit of {limit}; "
                f"accepted: texts of at most {limit} tokens",
                param=field,
            )
    vectors = await manager.embed(new_rid(), tuple(inputs))
    at = {
        text: np.frombuffer(vector, dtype="<f4").astype(np.float64) for text, vector in zip(texts, vectors, strict=True)
    }

    def cosine(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> float:
        return float(np.dot(a, b) / max(float(np.linalg.norm(a)) * float(np.linalg.norm(b)), 1e-12))

    return PairScores([cosine(at[first], at[second]) for first, second in pairs], sum(len(ids) for ids in inputs))


@router.post("/v1/score")
@router.post("/score")
async def score(body: ScoreBody, http_request: Request) -> Any:
    """Every pair's score, in the order of the pairs."""
    manager: TokenizerManager = http_request.app.state.manager
    worker: TokenizerWorker = http_request.app.state.tokenizer_worker
    check_model(body.model)
    pairs = score_pairs(body)
    if get_model().task == "rerank":
        scored = await pair_scores(
            manager, worker, pairs, lambda index: (f"pair {index} (text_1 with text_2)", "text_2")
        )
    else:
        scored = await _cosines(manager, worker, pairs)
    return {
        "id": f"score-{new_rid()}",
        "object": "list",
        "created": int(time.time()),
        "model": served_model_name(),
        "data": [{"index": i, "object": "score", "score": value} for i, value in enumerate(scored.scores)],
        "usage": {"prompt_tokens": scored.tokens, "total_tokens": scored.tokens},
    }
