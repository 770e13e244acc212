"""End to end, /v1/rerank on a real server over a tiny random cross-encoder (serve_testing.
tiny_bert_checkpoint: BertForSequenceClassification with one label), started once for the module:
the task inferred from the checkpoint, each document's score equal to sentence-transformers'
CrossEncoder.predict on the same files (fp32), results ordered by score with top_n and
return_documents, a pair's score bitwise the same alone and among many, bad requests a 4xx in
OpenAI's shape with the server serving on, and /v1/embeddings a 400 naming the task."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from serve_testing.server import ServerProcess
from serve_testing.tiny_bert_checkpoint import build_tiny_cross_encoder_checkpoint

pytestmark = pytest.mark.timeout(600)

MODEL = "tiny-reranker"
QUERY = "what is the capital of france"
DOCUMENTS = ["paris is the capital of france .", "the quick brown fox", "a journey of a thousand miles", "france"]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_cross_encoder_checkpoint(tmp_path_factory.mktemp("reranker") / MODEL)


@pytest.fixture(scope="module")
def http(model_dir: Path) -> Iterator[httpx.Client]:
    running = ServerProcess(model_dir, "--device", "cpu", "--dtype", "float32")
    try:
        running.wait_ready()
        with httpx.Client(base_url=running.base_url, timeout=120) as client:
            yield client
    finally:
        running.stop()


def rerank(http: httpx.Client, **fields: Any) -> dict[str, Any]:
    answer = http.post("/v1/rerank", json={"query": QUERY, "documents": DOCUMENTS, **fields})
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def test_scores_equal_sentence_transformers_cross_encoder(http: httpx.Client, model_dir: Path) -> None:
    from sentence_transformers import CrossEncoder

    reference: Any = CrossEncoder(str(model_dir), device="cpu")
    expected = [float(s) for s in reference.predict([(QUERY, d) for d in DOCUMENTS])]
    results = rerank(http)["results"]
    scores = {r["index"]: r["relevance_score"] for r in results}
    assert scores == pytest.approx(dict(enumerate(expected)), rel=1e-5, abs=1e-6)
    assert [r["relevance_score"] for r in results] == sorted(scores.values(), reverse=True)
    assert all(r["document"] == {"text": DOCUMENTS[r["index"]]} for r in results)


def test_top_n_and_return_documents(http: httpx.Client) -> None:
    full = rerank(http)
    top = rerank(http, top_n=2, return_documents=False)
    assert top["results"] == [{k: v for k, v in r.items() if k != "document"} for r in full["results"][:2]]
    assert top["model"] == MODEL and top["usage"]["prompt_tokens"] == full["usage"]["prompt_tokens"] > 0


def test_a_score_is_the_same_alone_and_among_many(http: httpx.Client) -> None:
    many = [f"{d} {' '.join(['fox'] * (i % 13))}" for i, d in enumerate(DOCUMENTS * 10)]
    together = {r["index"]: r["relevance_score"] for r in rerank(http, documents=many)["results"]}
    for at in (0, 17, 39):
        alone = rerank(http, documents=[many[at]])["results"][0]["relevance_score"]
        assert alone == together[at], at


BAD: list[tuple[str, dict[str, Any], str]] = [
    ("no documents", {"query": QUERY, "documents": []}, "documents holds 0 documents"),
    ("an empty document", {"query": QUERY, "documents": ["fox", ""]}, "documents[1] is an empty string"),
    ("an empty query", {"query": "", "documents": ["fox"]}, "query is an empty string"),
    ("too long", {"query": QUERY, "documents": [" ".join(["fox"] * 300)]}, "above this model's limit of 128"),
    ("top_n zero", {"query": QUERY, "documents": ["fox"], "top_n": 0}, "top_n"),
    ("another model", {"query": QUERY, "documents": ["fox"], "model": "x"}, "model 'x' is not served here"),
]


@pytest.mark.parametrize(("body", "needle"), [c[1:] for c in BAD], ids=[c[0] for c in BAD])
def test_a_bad_rerank_request_is_a_4xx_in_openais_shape(http: httpx.Client, body: dict[str, Any], needle: str) -> None:
    answer = http.post("/v1/rerank", json=body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and needle in error["message"], error
    assert len(rerank(http, documents=["fox"])["results"]) == 1  # still serving


def test_embeddings_name_the_task(http: httpx.Client) -> None:
    answer = http.post("/v1/embeddings", json={"input": "fox"})
    assert answer.status_code == 400
    assert (
        "serves task 'embed', and model 'tiny-reranker' is served with task 'rerank'"
        in answer.json()["error"]["message"]
    )


def test_score_gives_each_pair_the_rerank_score(http: httpx.Client) -> None:
    """vLLM's /v1/score on a cross-encoder: one text_1 against every text_2, or two lists in order."""
    by_document = {r["index"]: r["relevance_score"] for r in rerank(http)["results"]}
    answer = http.post("/v1/score", json={"text_1": QUERY, "text_2": DOCUMENTS})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["object"] == "list" and body["model"] == MODEL and body["usage"]["prompt_tokens"] > 0
    assert body["data"] == [{"index": i, "object": "score", "score": by_document[i]} for i in range(len(DOCUMENTS))]
    paired = http.post("/v1/score", json={"text_1": [QUERY, QUERY], "text_2": DOCUMENTS[:2]}).json()
    assert [d["score"] for d in paired["data"]] == [by_document[0], by_document[1]]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"text_1": ["a", "b"], "text_2": ["c", "d", "e"]}, "text_1 holds 2 texts and text_2 3; accepted: one text_1"),
        ({"text_1": QUERY, "text_2": []}, "text_2 holds 0 texts"),
        ({"text_1": QUERY, "text_2": ["fox", ""]}, "text_2[1] is an empty string"),
        ({"text_1": QUERY, "text_2": " ".join(["fox"] * 300)}, "above this model's limit of 128"),
    ],
    ids=["lists that do not pair", "no text_2", "an empty text", "too long"],
)
def test_a_bad_score_request_is_a_400_naming_the_field(http: httpx.Client, body: dict[str, Any], needle: str) -> None:
    answer = http.post("/v1/score", json=body)
    assert answer.status_code == 400 and needle in answer.json()["error"]["message"], answer.text
