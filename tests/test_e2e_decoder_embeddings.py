"""End to end, a decoder serving /v1/embeddings (--task embed) on a real server over a tiny random
Qwen3 laid out as Qwen3-Embedding ships (serve_testing.tiny_embedding_decoder: last-token pooling,
Normalize, Matryoshka sizes 16, 32 and 64 in config.json), started once for the module: vectors
equal to transformers' AutoModel last hidden state pooled the same way, each input's vector bitwise
the same alone and among 64 of mixed lengths, `dimensions` cut and re-normalized where declared and
a 400 naming the declared sizes elsewhere, /v1/score the cosine of two embeddings, and the
generation endpoints a 400 naming the task."""

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
from serve_testing.tiny_embedding_decoder import build_tiny_embedding_decoder

pytestmark = pytest.mark.timeout(600)

MODEL = "tiny-qwen3-embedding"
TEXTS = ["Paris is the capital of France.", "the quick brown fox", "A journey of a thousand miles."]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_embedding_decoder(tmp_path_factory.mktemp("qwen3") / MODEL, matryoshka_dimensions=(16, 32, 64))


@pytest.fixture(scope="module")
def server(model_dir: Path) -> Iterator[ServerProcess]:
    running = ServerProcess(model_dir, "--task", "embed", "--device", "cpu", "--dtype", "float32")
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
    """transformers' AutoModel (the decoder, no LM head) over each text alone, its last token's row normalized."""
    import transformers

    tokenizer: Any = transformers.AutoTokenizer.from_pretrained(str(model_dir))
    model: Any = transformers.AutoModel.from_pretrained(str(model_dir), dtype=torch.float32).eval()
    with torch.no_grad():
        rows = [model(torch.tensor([tokenizer(text)["input_ids"]])).last_hidden_state[0, -1] for text in texts]
    return F.normalize(torch.stack(rows), dim=-1)


def test_the_openai_client_embeds_as_transformers_last_hidden_state(server: ServerProcess, model_dir: Path) -> None:
    from openai import OpenAI

    client = OpenAI(base_url=server.base_url + "/v1", api_key="unused")
    answer = client.embeddings.create(model=MODEL, input=TEXTS)
    ours = torch.tensor([item.embedding for item in answer.data])
    torch.testing.assert_close(ours, _reference(model_dir, TEXTS), rtol=1e-5, atol=1e-5)
    assert answer.model == MODEL and answer.usage.prompt_tokens > len(TEXTS)


def test_an_input_is_the_same_bytes_alone_and_among_64_of_mixed_lengths(http: httpx.Client) -> None:
    words = "the quick brown fox jumps over the lazy dog and paris is the capital of france".split()
    batch = [" ".join(words[i % 7 : i % 7 + 1 + i % 16]) for i in range(64)]
    together = embedded_bytes(http, input=batch)
    for at in (0, 9, 63):
        assert embedded_bytes(http, input=batch[at]) == [together[at]], at


def test_dimensions_cut_the_vector_and_normalize_it_again(http: httpx.Client) -> None:
    whole = np.frombuffer(embedded_bytes(http, input=TEXTS[0])[0], dtype="<f4")
    short = np.frombuffer(embedded_bytes(http, input=TEXTS[0], dimensions=16)[0], dtype="<f4")
    assert short.shape == (16,) and whole.shape == (64,)
    np.testing.assert_allclose(short, whole[:16] / np.linalg.norm(whole[:16]), rtol=1e-6, atol=1e-7)
    assert embedded_bytes(http, input=TEXTS[0], dimensions=64) == [whole.tobytes()]


def test_a_size_not_declared_is_a_400_naming_the_declared_ones(http: httpx.Client) -> None:
    answer = http.post("/v1/embeddings", json={"input": "fox", "dimensions": 20})
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert error["param"] == "dimensions" and "accepted: dimensions of 16, 32, 64" in error["message"], error


def test_score_on_an_embedding_model_is_the_cosine_of_the_embeddings(http: httpx.Client) -> None:
    """vLLM's /v1/score on an embedding model: each pair's cosine similarity."""
    vectors = [np.frombuffer(v, dtype="<f4").astype(np.float64) for v in embedded_bytes(http, input=TEXTS)]
    answer = http.post("/v1/score", json={"text_1": TEXTS[0], "text_2": TEXTS[1:]})
    assert answer.status_code == 200, answer.text
    scores = [item["score"] for item in answer.json()["data"]]
    expected = [float(vectors[0] @ v / np.linalg.norm(vectors[0]) / np.linalg.norm(v)) for v in vectors[1:]]
    assert scores == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/v1/rerank"])
def test_another_tasks_endpoint_names_the_task(http: httpx.Client, path: str) -> None:
    answer = http.post(path, json={"messages": [{"role": "user", "content": "hi"}], "prompt": "hi", "query": "q"})
    assert answer.status_code == 400
    assert "is served with task 'embed'" in answer.json()["error"]["message"]
