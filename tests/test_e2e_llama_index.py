"""llama-index's OpenAI-like embedding class (llama-index-embeddings-openai-like) at its defaults
against a real server on all-MiniLM-L6-v2 (from its package; started once for the module): its
document and query embeddings are the server's own vectors, and a VectorStoreIndex built with it
retrieves the passage that answers a question. (llama-index-core ships tiktoken's vocabulary for
its default sentence splitter, so nothing is downloaded.)"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import httpx
import numpy as np
import pytest

from serve_testing.minilm_checkpoint import unpacked_minilm
from serve_testing.server import ServerProcess

pytestmark = pytest.mark.timeout(600)

MODEL = "all-MiniLM-L6-v2"
PASSAGES = [
    "Paris is the capital and largest city of France.",
    "The mitochondrion is the powerhouse of the cell.",
    "A fox is a small omnivorous mammal with a bushy tail.",
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    running = ServerProcess(unpacked_minilm(tmp_path_factory.mktemp("minilm")), "--device", "cpu")
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


def _embed_model(server: ServerProcess) -> Any:
    from llama_index.embeddings.openai_like import OpenAILikeEmbedding  # type: ignore[import-untyped]

    return OpenAILikeEmbedding(model_name=MODEL, api_base=server.base_url + "/v1")


def test_llama_index_embeddings_are_the_servers_vectors(server: ServerProcess) -> None:
    embed_model = _embed_model(server)
    documents = embed_model.get_text_embedding_batch(PASSAGES)
    query = embed_model.get_query_embedding(PASSAGES[0])
    answer = httpx.post(
        server.base_url + "/v1/embeddings", json={"input": PASSAGES, "encoding_format": "base64"}, timeout=120
    )
    ours = [np.frombuffer(base64.b64decode(item["embedding"]), dtype="<f4") for item in answer.json()["data"]]
    assert [np.asarray(vector, dtype="<f4").tobytes() for vector in documents] == [v.tobytes() for v in ours]
    assert query == documents[0] and len(query) == 384


def test_a_vector_store_index_retrieves_the_passage_that_answers(server: ServerProcess) -> None:
    from llama_index.core import Document, VectorStoreIndex

    index = VectorStoreIndex.from_documents([Document(text=p) for p in PASSAGES], embed_model=_embed_model(server))
    hits = index.as_retriever(similarity_top_k=1).retrieve("What is the capital of France?")
    assert [hit.node.get_content() for hit in hits] == [PASSAGES[0]]
