"""End to end, each attention pair a user can launch on a CPU serves greedy output equal to
transformers token for token: the default (auto with deterministic inference: cpu_paged for both
halves), auto without it (torch_native prompts, cpu_paged decodes), the two split pairs, the
deprecated alias, and triton in its interpreter. Several requests run at once, so the steps are
extends, decodes and mixed batches. /server_info shows the runner's stamp, while the published
config keeps what the operator asked for (and what resolution declared)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from serve_testing.server import ServerProcess
from serve_testing.tiny_checkpoint import build_tiny_checkpoint

pytestmark = pytest.mark.timeout(900)

PROMPTS = ["The quick brown fox", "Hello", "Numbers: one two three four five six seven"]
NEW_TOKENS = 10

# id: (flags, environment, the stamp /server_info must show, the kernel bag as published)
LAUNCHES: dict[str, tuple[list[str], dict[str, str], dict[str, object], dict[str, object]]] = {
    "auto (the default)": (
        [],
        {},
        {"prefill": "cpu_paged", "decode": "cpu_paged", "batch_invariant": True},
        {"attention_backend": "auto", "enable_deterministic_inference": True},
    ),
    "auto without deterministic inference": (
        ["--enable-deterministic-inference", "false"],
        {},
        {"prefill": "torch_native", "decode": "cpu_paged", "batch_invariant": False},
        {"attention_backend": "auto", "enable_deterministic_inference": False},
    ),
    "torch_native prefill, cpu_paged decode": (
        ["--prefill-attention-backend", "torch_native", "--decode-attention-backend", "cpu_paged"],
        {},
        {"prefill": "torch_native", "decode": "cpu_paged", "batch_invariant": False},
        {
            "attention_backend": "auto",
            "prefill_attention_backend": "torch_native",
            "decode_attention_backend": "cpu_paged",
            "enable_deterministic_inference": False,
        },
    ),
    "cpu_paged prefill, torch_native decode": (
        ["--prefill-attention-backend", "cpu_paged", "--decode-attention-backend", "torch_native"],
        {},
        {"prefill": "cpu_paged", "decode": "torch_native", "batch_invariant": False},
        {
            "attention_backend": "auto",
            "prefill_attention_backend": "cpu_paged",
            "decode_attention_backend": "torch_native",
        },
    ),
    "intel_amx (deprecated alias)": (
        ["--attention-backend", "intel_amx"],
        {},
        {"prefill": "cpu_paged", "decode": "cpu_paged", "batch_invariant": False},
        {"attention_backend": "intel_amx"},
    ),
    "triton (interpreter)": (
        ["--attention-backend", "triton"],
        {"TRITON_INTERPRET": "1"},
        {"prefill": "triton", "decode": "triton", "batch_invariant": False},
        {"attention_backend": "triton"},
    ),
}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "tiny-llama")


@pytest.fixture(scope="module")
def reference(model_dir: Path) -> list[list[int]]:
    """transformers' greedy continuation of each prompt, in float32."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    out = []
    for prompt in PROMPTS:
        ids = tokenizer.encode(prompt)
        generated = model.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None)
        out.append(generated[0, len(ids) :].tolist())
    return out


def greedy(base_url: str, prompt: str) -> list[int]:
    body = {"text": prompt, "sampling_params": {"max_new_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True}}
    response = httpx.post(base_url + "/generate", json=body, timeout=300)
    assert response.status_code == 200, response.text
    ids: list[int] = response.json()["output_ids"]
    return ids


@pytest.mark.parametrize("launch", list(LAUNCHES))
def test_the_pair_serves_what_transformers_generates(launch: str, model_dir: Path, reference: list[list[int]]) -> None:
    flags, env, stamp, kernel = LAUNCHES[launch]
    server = ServerProcess(
        model_dir,
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--max-total-tokens",
        "4096",
        "--chunked-prefill-size",
        "4",
        *flags,
        env=env,
    )
    try:
        server.wait_ready()
        with ThreadPoolExecutor(len(PROMPTS)) as pool:
            served = list(pool.map(lambda p: greedy(server.base_url, p), PROMPTS))
        assert served == reference
        info = httpx.get(server.base_url + "/server_info", timeout=30).json()
        assert info["model"]["runners"] == {"target": {**stamp, "is_draft_override": False, "linear_attn": None}}
        published = info["bags"]["exec"]["kernel"]
        for leaf, value in kernel.items():
            assert published[leaf] == value, (leaf, published)
    finally:
        server.stop()
