"""End to end, a GGUF checkpoint served as it is: `serve --model <the bundled SmolLM2 GGUF>` writes
the file's tokenizer once into the model cache, serves under the file's name, answers the README's
question, answers a batch of greedy requests together exactly as it answers them one at a time (the
quantized kernels are batch-invariant), says in /server_info what its weights are, and refuses a
change of quantization while serving, changing nothing.

The refusals at launch and on a startup override are in tests/test_gguf_launch.py (in process).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from runtime_runner.loading.default_model import bundled_gguf
from serve.testing.server import ServerProcess

pytestmark = pytest.mark.timeout(600)

NAME = "SmolLM2-135M-Instruct.Q4_1"
PROMPTS = [
    "The capital of France is",
    "1, 2, 3, 4, 5,",
    "Once upon a time,",
    "def add(a, b):\n    ",
    "The three primary colors are",
    "Water boils at",
]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    running = ServerProcess(bundled_gguf(), "--max-total-tokens", "8192", "--device", "cpu")
    try:
        running.wait_ready(timeout_s=420)
        yield running
    finally:
        running.stop()


def _complete(base_url: str, prompt: str) -> tuple[str, list[Any]]:
    body = {"model": NAME, "prompt": prompt, "max_tokens": 16, "temperature": 0, "logprobs": 1}
    response = httpx.post(base_url + "/v1/completions", json=body, timeout=300)
    assert response.status_code == 200, response.text
    choice = response.json()["choices"][0]
    return choice["text"], choice["logprobs"]["token_logprobs"]


def test_the_gguf_answers_the_readme_question_under_its_file_name(server: ServerProcess) -> None:
    body = {
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "max_tokens": 24,
        "temperature": 0,
    }
    response = httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=300)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["model"] == NAME
    assert "Paris" in answer["choices"][0]["message"]["content"]
    assert answer["choices"][0]["finish_reason"] == "stop"


def test_greedy_requests_together_answer_as_one_at_a_time(server: ServerProcess) -> None:
    """Text and logprobs, bitwise. Reverse-verified: with each quantized matrix run as oneDNN's
    matmul of its de-quantized copy (a PackedLinear, whose sums depend on the batch's rows), the
    batch's logprobs differed from the lone requests' in their last digits."""
    alone = [_complete(server.base_url, prompt) for prompt in PROMPTS]
    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        together = list(pool.map(lambda prompt: _complete(server.base_url, prompt), PROMPTS))
    assert together == alone


def test_server_info_says_what_the_weights_are_and_a_quantization_change_is_refused(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.base_url, timeout=60) as http:
        info = http.get("/server_info").json()
        assert info["model"]["quantization"] == "gguf F32 x61, Q4_1 x210, Q8_0 x1"
        assert info["model"]["runners"]["target"]["batch_invariant"] is True
        assert info["provenance"]["tokenizer_path"] == "resolved:tokenizer_path"
        refused = http.patch("/v1/runtime_config", json={"quantization": "int8"})
        assert refused.status_code == 400 and "quantization" in refused.text, refused.text
        assert http.get("/server_info").json()["config_hashes"] == info["config_hashes"]
