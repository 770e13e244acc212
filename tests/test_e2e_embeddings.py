"""End to end, /v1/embeddings on a real server over a tiny random BERT checkpoint (serve_testing.
tiny_bert_checkpoint: BertModel, WordPiece, mean pooling and Normalize as all-MiniLM-L6-v2 has
them), started once for the module: the task inferred from the checkpoint, embeddings equal to
transformers' BertModel pooled as sentence-transformers pools, every input form OpenAI takes,
base64 carrying the float bytes, each input's vector bitwise the same alone and among 64 of mixed
lengths, the openai client and langchain's OpenAIEmbeddings unchanged, every bad input a 4xx in
OpenAI's shape with the server serving on, the generation endpoints a 400 naming the task, and the
embedding counters in /metrics."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import torch
import torch.nn.functional as F

from serve_testing.embeddings_client import embedded_bytes
from serve_testing.server import ServerProcess
from serve_testing.tiny_bert_checkpoint import build_tiny_bert_checkpoint

pytestmark = pytest.mark.timeout(600)

MODEL = "tiny-bert"
POSITIONS = 128
TEXTS = ["Paris is the capital of France.", "the quick brown fox", "Embeddings map text to vectors."]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_bert_checkpoint(tmp_path_factory.mktemp("bert") / MODEL, max_position_embeddings=POSITIONS)


@pytest.fixture(scope="module")
def server(model_dir: Path) -> Iterator[ServerProcess]:
    running = ServerProcess(model_dir, "--device", "cpu", "--dtype", "float32")
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=120) as client:
        yield client


def _reference(model_dir: Path, texts: list[str]) -> torch.Tensor:
    """transformers' BertModel over each text alone, mean-pooled and normalized (sentence-transformers' modules)."""
    import transformers

    tokenizer: Any = transformers.AutoTokenizer.from_pretrained(str(model_dir))
    model: Any = transformers.BertModel.from_pretrained(str(model_dir)).eval()
    vectors = []
    with torch.no_grad():
        for text in texts:
            rows = model(torch.tensor([tokenizer(text)["input_ids"]])).last_hidden_state[0]
            vectors.append(F.normalize(rows.mean(dim=0), dim=0))
    return torch.stack(vectors)


def test_the_openai_client_embeds_as_transformers_does(server: ServerProcess, model_dir: Path) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=server.base_url + "/v1", api_key="unused")
    answer = client.embeddings.create(model=MODEL, input=TEXTS)
    ours = torch.tensor([item.embedding for item in answer.data])
    torch.testing.assert_close(ours, _reference(model_dir, TEXTS), rtol=1e-5, atol=1e-5)
    assert answer.model == MODEL and [item.index for item in answer.data] == [0, 1, 2]
    assert answer.usage.prompt_tokens == answer.usage.total_tokens > len(TEXTS) * 3


def test_every_input_form_gives_the_same_vectors(http: httpx.Client) -> None:
    ids = http.post("/tokenize", json={"prompt": TEXTS[0]}).json()["tokens"]
    alone = embedded_bytes(http, input=TEXTS[0])
    assert embedded_bytes(http, input=ids) == alone
    assert embedded_bytes(http, input=[ids, ids]) == alone * 2
    floats = http.post("/v1/embeddings", json={"input": TEXTS[0]}).json()["data"][0]["embedding"]
    assert np.asarray(floats, dtype="<f4").tobytes() == alone[0]


def test_an_input_is_the_same_bytes_alone_and_among_64_of_mixed_lengths(http: httpx.Client) -> None:
    words = "the quick brown fox jumps over the lazy dog and paris is the capital of france".split()
    batch = [" ".join(words[i % 7 : i % 7 + 1 + i % 16]) for i in range(64)]
    together = embedded_bytes(http, input=batch)
    for at in (0, 9, 63):
        assert embedded_bytes(http, input=batch[at]) == [together[at]], at


def test_truncation_when_asked_keeps_the_limit(http: httpx.Client) -> None:
    long = " ".join(["fox"] * 300)
    refused = http.post("/v1/embeddings", json={"input": long})
    assert (
        refused.status_code == 400 and f"above this model's limit of {POSITIONS}" in refused.json()["error"]["message"]
    )
    answer = http.post("/v1/embeddings", json={"input": long, "truncate_prompt_tokens": -1})
    assert answer.status_code == 200 and answer.json()["usage"]["prompt_tokens"] == POSITIONS


def test_langchain_openai_embeddings_work_unchanged(server: ServerProcess, http: httpx.Client) -> None:
    """check_embedding_ctx_length=False: by default langchain first tokenizes with tiktoken, which
    downloads its vocabulary from the internet."""
    from langchain_openai import OpenAIEmbeddings

    embeddings = OpenAIEmbeddings(
        model=MODEL,
        base_url=server.base_url + "/v1",
        api_key="unused",
        check_embedding_ctx_length=False,  # type: ignore[arg-type]
    )
    vectors = embeddings.embed_documents(TEXTS[:2])
    query = embeddings.embed_query(TEXTS[0])
    assert np.asarray(vectors[0], dtype="<f4").tobytes() == embedded_bytes(http, input=TEXTS[0])[0]
    assert query == vectors[0]


# (id, request body, status, what the message must name)
BAD_INPUTS: list[tuple[str, dict[str, Any], int, str]] = [
    ("empty list", {"input": []}, 400, "input is an empty list"),
    ("empty string", {"input": ["fox", ""]}, 400, "input[1] is an empty string"),
    ("empty id list", {"input": [[5], []]}, 400, "input[1] is an empty list of token ids"),
    ("token id out of range", {"input": [3, 100000]}, 400, "token id 100000 is not in the vocabulary"),
    ("too long", {"input": [[5] * (POSITIONS + 1)]}, 400, f"input[0] holds {POSITIONS + 1} tokens, above"),
    ("unknown encoding_format", {"input": "fox", "encoding_format": "int8"}, 400, "encoding_format"),
    ("dimensions", {"input": "fox", "dimensions": 16}, 400, "does not declare Matryoshka truncation"),
    ("10,000 inputs", {"input": ["fox"] * 10_000}, 400, "input holds 10000 inputs; accepted: at most 2048"),
    ("another model", {"input": "fox", "model": "gpt-4"}, 400, "model 'gpt-4' is not served here"),
    ("no input", {"model": MODEL}, 400, "input"),
    ("a field not served", {"input": "fox", "truncate": True}, 400, "truncate"),
]


@pytest.mark.parametrize(("body", "status", "needle"), [c[1:] for c in BAD_INPUTS], ids=[c[0] for c in BAD_INPUTS])
def test_a_bad_embedding_request_is_a_4xx_in_openais_shape(
    http: httpx.Client, body: dict[str, Any], status: int, needle: str
) -> None:
    answer = http.post("/v1/embeddings", json=body)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and needle in error["message"], error
    assert len(embedded_bytes(http, input="fox")) == 1  # still serving


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/generate"])
def test_a_generation_endpoint_names_the_task(http: httpx.Client, path: str) -> None:
    answer = http.post(path, json={"messages": [{"role": "user", "content": "hi"}], "prompt": "hi", "text": "hi"})
    assert answer.status_code == 400
    assert (
        "serves task 'generate', and model 'tiny-bert' is served with task 'embed'" in answer.json()["error"]["message"]
    )


def test_metrics_count_embedding_requests_inputs_and_tokens(http: httpx.Client) -> None:
    def counters() -> dict[str, float]:
        rows = [line.split() for line in http.get("/metrics").text.splitlines() if line.startswith("serve_embedding_")]
        return {name: float(value) for name, value in rows}

    before = counters()
    answer = http.post("/v1/embeddings", json={"input": TEXTS[:2]}).json()
    after = counters()
    assert after["serve_embedding_requests_total"] - before["serve_embedding_requests_total"] == 1
    assert after["serve_embedding_inputs_total"] - before["serve_embedding_inputs_total"] == 2
    assert (
        after["serve_embedding_tokens_total"] - before["serve_embedding_tokens_total"]
        == answer["usage"]["prompt_tokens"]
    )


def test_server_info_and_health_answer_for_an_encoder(http: httpx.Client) -> None:
    assert http.get("/health").status_code == 200
    info = http.get("/server_info")
    assert info.status_code == 200 and '"task"' in info.text and '"embed"' in info.text, info.text[:2000]
