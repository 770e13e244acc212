"""End to end, a GGUF checkpoint served as it is: `serve --model <the bundled SmolLM2 GGUF>` writes the
file's tokenizer once into the model cache, serves under the file's name, answers the README's
question as llama-server does (int8 activations by default), answers a batch of greedy requests
together exactly as it answers them one at a time (the quantized kernels are batch-invariant), says
in /server_info what its weights are and which instruction tier its integer kernels run, and refuses
a change of quantization while serving, changing nothing. A tiny file of llama-quantize's Q4_K_M mix
(fused q|k|v of mixed types) serves the greedy tokens of its de-quantized reference, together and
alone.

The refusals at launch and on a startup override are in tests/test_gguf_launch.py (in process).
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import torch

import native_build
from runtime_runner.loading.default_model import bundled_gguf
from serve_testing.llama_quantize_mix import q4_k_m_types
from serve_testing.server import ServerProcess
from serve_testing.tiny_checkpoint import build_tokenizer
from serve_testing.tiny_gguf import write_tiny_gguf

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
    """With no flag the file's matrices read int8 activations, as llama.cpp computes: the answer
    is llama-server's on the same file ("L'Étoile, la Marseillaise, la femme au roi, ...", seen on
    an AMX Xeon with --no-repack), not the de-quantized model's "The capital of France is Paris."
    (whose first token wins by a logit margin of 0.08, which the activations' rounding overturns;
    `--quantized-activations float32` serves that one, tests/test_gguf_checkpoint.py)."""
    body = {
        "messages": [{"role": "user", "content": "What is the capital of France?"}],
        "max_tokens": 24,
        "temperature": 0,
    }
    response = httpx.post(server.base_url + "/v1/chat/completions", json=body, timeout=300)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["model"] == NAME
    assert answer["choices"][0]["message"]["content"].startswith("L'Étoile, la Marseillaise, la femme au ")


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
        assert info["model"]["cpu_tier"] == native_build.detected_tier()
        leaves = info["config"]["leaves"]
        assert leaves["quantized_activations"]["value"] == "int8"
        assert leaves["cpu_isa"]["value"] == info["model"]["cpu_tier"]
        assert info["provenance"]["tokenizer_path"] == "resolved:tokenizer_path"
        assert info["provenance"]["quantized_activations"] == "resolved:quantized_kernels"
        refused = http.patch("/v1/runtime_config", json={"quantization": "int8"})
        assert refused.status_code == 400 and "quantization" in refused.text, refused.text
        assert http.get("/server_info").json()["config_hashes"] == info["config_hashes"]


MIX_PROMPTS = [[5, 17, 99, 3, 42, 8], [7, 7, 30], list(range(40, 66)), [300, 2, 250, 11]]
MIX_NEW_TOKENS = 8


def _greedy_ids(base_url: str, prompt: list[int]) -> list[int]:
    body = {
        "input_ids": prompt,
        "sampling_params": {"max_new_tokens": MIX_NEW_TOKENS, "temperature": 0, "ignore_eos": True},
    }
    response = httpx.post(base_url + "/generate", json=body, timeout=300)
    assert response.status_code == 200, response.text
    ids: list[int] = response.json()["output_ids"]
    return ids


def test_a_q4_k_m_mix_serves_its_dequantized_models_greedy_tokens(tmp_path: Path) -> None:
    """A Llama of 320-wide rows written as llama-quantize's Q4_K_M (Q5_0 q|k beside a Q8_0 v in
    layer 1, a tied Q8_0 embedding, Q4_K and Q6_K down projections), served by the real server in
    float32: each prompt's greedy tokens are transformers' on the de-quantized reference, alone and
    all together. Weights drawn wide (initializer_range 0.5), so no greedy choice is a near tie.

    Reverse-verified by hand: with projection_stack.cpp not advancing a part's first column (the
    server runs the native step, whose mixed q|k|v goes through the stack), the first prompt's
    tokens differed from the first."""
    transformers: Any = importlib.import_module("transformers")
    vocab = build_tokenizer(tmp_path / "tokenizer")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=vocab,
        hidden_size=320,
        intermediate_size=512,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        initializer_range=0.5,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=None,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    gguf_file, reference_dir = write_tiny_gguf(model, tmp_path / "mix", "Q4_K", types=q4_k_m_types(model))
    reference = transformers.AutoModelForCausalLM.from_pretrained(reference_dir, dtype=torch.float32).eval()
    with torch.inference_mode():
        expected = [
            reference.generate(
                torch.tensor([p]),
                attention_mask=torch.ones(1, len(p), dtype=torch.long),
                max_new_tokens=MIX_NEW_TOKENS,
                do_sample=False,
                eos_token_id=None,
                pad_token_id=0,
            )[0, len(p) :].tolist()
            for p in MIX_PROMPTS
        ]
    server = ServerProcess(
        gguf_file,
        "--tokenizer-path",
        str(tmp_path / "tokenizer"),
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--quantized-activations",
        "float32",
    )
    try:
        server.wait_ready(timeout_s=420)
        alone = [_greedy_ids(server.base_url, p) for p in MIX_PROMPTS]
        with ThreadPoolExecutor(len(MIX_PROMPTS)) as pool:
            together = list(pool.map(lambda p: _greedy_ids(server.base_url, p), MIX_PROMPTS))
    finally:
        server.stop()
    assert alone == expected
    assert together == expected
