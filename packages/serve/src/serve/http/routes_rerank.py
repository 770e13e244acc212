"""POST /v1/rerank (and llama-server's /rerank): a cross-encoder's relevance score of each document
to a query, in the shape llama-server, vLLM and Cohere-style clients read: `results` ordered by
score, highest first, each with its `index` in `documents` and, unless return_documents is false,
the document."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Request
from pydantic import Field

from serve.http.admission import check_model, new_rid
from serve.http.errors import bad_request
from serve.http.pair_scores import pair_scores
from serve.http.request_object import RequestObject
from serve.http.unserved_fields import RERANK_FIELDS
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.served_name import served_model_name
from serve.tokenizer.worker import TokenizerWorker

router = APIRouter()

MAX_DOCUMENTS = 2048  # as many as /v1/embeddings takes inputs


class RerankBody(RequestObject):
    """A query and the documents to score against it."""

    unserved = RERANK_FIELDS

    model: str | None = None
    query: str
    documents: list[str]
    top_n: Annotated[int, Field(ge=1)] | None = None
    return_documents: bool = True


@router.post("/v1/rerank")
@router.post("/rerank")
async def rerank(body: RerankBody, http_request: Request) -> Any:
    """Every document's score (the top_n highest), highest first."""
    manager: TokenizerManager = http_request.app.state.manager
    worker: TokenizerWorker = http_request.app.state.tokenizer_worker
    check_model(body.model)
    if not body.query:
        raise bad_request("query is an empty string; accepted: text to score the documents against", param="query")
    if not body.documents or len(body.documents) > MAX_DOCUMENTS:
        raise bad_request(
            f"documents holds {len(body.documents)} documents; accepted: 1 to {MAX_DOCUMENTS}", param="documents"
        )
    for index, document in enumerate(body.documents):
        if not document:
            raise bad_request(
                f"documents[{index}] is an empty string; accepted: text to score", param=f"documents[{index}]"
            )
    scored = await pair_scores(
        manager,
        worker,
        [(body.query, document) for document in body.documents],
        lambda index: (f"the query with documents[{index}]", f"documents[{index}]"),
    )
    scores = scored.scores
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[: body.top_n]
    tokens = scored.tokens
    return {
        "id": f"rerank-{new_rid()}",
        "model": served_model_name(),
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        "results": [
            {
                "index": i,
                "relevance_score": scores[i],
                **({"document": {"text": body.documents[i]}} if body.return_documents else {}),
            }
            for i in order
        ],
    }
