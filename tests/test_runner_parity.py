"""The runner, wired to attn_backends' factory, generates exactly what transformers generates.

Tiny random checkpoints of each architecture (one of them sharded), several prompts of different
lengths batched together, page sizes 1 and 16, whole and chunked prefill, and a batch that mixes
prefill with decode: greedy tokens equal `generate(do_sample=False)`; prefill logits match within
atol/rtol 1e-4 (fp32). One test runs the real SmolLM2-135M weights.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from attn_backends import build_attention_pair
from config_bags.server import Bags, MemoryBag, ScheduleBag
from runtime_runner.loading.default_model import (
    CACHE_ENV,
    DEFAULT_MODEL_NAME,
    ensure_default_model,
    is_converted,
    model_cache_dir,
)
from runtime_runner.runner import ModelRunner
from runtime_runner.standalone import StandaloneDriver

Runner = Callable[[Path, int], ModelRunner]
TINY: dict[str, Any] = dict(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    initializer_range=0.1,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)
CHECKPOINTS: dict[str, tuple[str, dict[str, Any], str | None]] = {
    "llama": ("LlamaForCausalLM", {"mlp_bias": True}, None),
    "llama-sharded-llama3-rope": (
        "LlamaForCausalLM",
        {
            "rope_parameters": {
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 16,
                "rope_theta": 500000.0,
            }
        },
        "30KB",
    ),
    "qwen2-tied": ("Qwen2ForCausalLM", {"tie_word_embeddings": True}, None),
    "qwen3": ("Qwen3ForCausalLM", {"head_dim": 16}, None),
}
PROMPT_LENGTHS = (3, 11, 26, 40)
NEW_TOKENS = 8
TOLERANCE: dict[str, Any] = dict(atol=1e-4, rtol=1e-4)


@pytest.fixture(scope="module", params=sorted(CHECKPOINTS))
def reference(request: pytest.FixtureRequest, tiny_checkpoint: Callable[..., Path]) -> dict[str, Any]:
    """A saved tiny checkpoint, its prompts, and transformers' greedy tokens and prefill logits."""
    from transformers import AutoModelForCausalLM

    architecture, overrides, shard = CHECKPOINTS[request.param]
    target = tiny_checkpoint(architecture, shard=shard, **{**TINY, **overrides})
    model: Any = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32)
    model.eval()
    if shard:
        assert len(list(target.glob("*.safetensors"))) > 1
    gen = torch.Generator().manual_seed(5)
    prompts = [torch.randint(0, TINY["vocab_size"], (n,), generator=gen).tolist() for n in PROMPT_LENGTHS]
    tokens, logits = [], []
    with torch.inference_mode():
        for prompt in prompts:
            ids = torch.tensor([prompt])
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=NEW_TOKENS,
                do_sample=False,
                eos_token_id=None,
                pad_token_id=0,
            )
            tokens.append(out[0, len(prompt) :].tolist())
            logits.append(model(ids).logits[0, -1])
    return {"dir": target, "prompts": prompts, "tokens": tokens, "logits": torch.stack(logits)}


@pytest.fixture
def runner(standalone_runner: Callable[..., ModelRunner]) -> Runner:
    """A runner over a checkpoint with pages of the size given, in a 2048-slot pool."""
    return lambda model_dir, page_size: standalone_runner(
        model_dir, schedule=ScheduleBag(page_size=page_size), memory=MemoryBag(max_total_tokens=2048)
    )


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("chunk", [None, 7])
def test_greedy_tokens_equal_transformers(
    reference: dict[str, Any], runner: Runner, page_size: int, chunk: int | None
) -> None:
    """Reverse-verified: dropping prefix_len from the causal mask in torch_native fails every chunked case."""
    driver = StandaloneDriver(runner(reference["dir"], page_size))
    assert driver.generate(reference["prompts"], NEW_TOKENS, chunk=chunk) == reference["tokens"]
    assert len(driver.free_pages) == driver.runner.pool.num_pages


@pytest.mark.parametrize("chunk", [None, 9])
def test_prefill_logits_match_transformers(reference: dict[str, Any], runner: Runner, chunk: int | None) -> None:
    driver = StandaloneDriver(runner(reference["dir"], 16))
    for prompt in reference["prompts"]:
        driver.add(prompt)
    last: dict[int, torch.Tensor] = {}
    while any(s.prefilling for s in driver.active):
        out = driver.step(chunk)
        for i, token in enumerate(out.next_token_ids):
            if token != -1 and i not in last:
                last[i] = out.logits[i]
    torch.testing.assert_close(
        torch.stack([last[i] for i in range(len(PROMPT_LENGTHS))]), reference["logits"], **TOLERANCE
    )


def test_mixed_prefill_and_decode_batches(reference: dict[str, Any], runner: Runner) -> None:
    """Prompts admitted while others decode share a batch (forward_mode "mixed") and still match."""
    driver = StandaloneDriver(runner(reference["dir"], 16))
    prompts = reference["prompts"]
    seqs = [driver.add(prompts[0]), driver.add(prompts[1])]
    modes = []
    for late in (prompts[2], prompts[3]):
        for _ in range(2):
            driver.step(chunk=16)
        seqs.append(driver.add(late))
        modes.append("mixed" if any(not s.prefilling for s in driver.active) else "extend")
    while any(len(s.output) < NEW_TOKENS for s in seqs):
        driver.step(chunk=16)
    assert modes == ["mixed", "mixed"]
    assert [s.output[:NEW_TOKENS] for s in seqs] == reference["tokens"]


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The converted default model: the user cache when it holds one, else one conversion per session."""
    if is_converted(model_cache_dir() / DEFAULT_MODEL_NAME):
        yield model_cache_dir() / DEFAULT_MODEL_NAME
        return
    saved = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(tmp_path_factory.mktemp("model-cache"))
    try:
        yield ensure_default_model()
    finally:
        if saved is None:
            del os.environ[CACHE_ENV]
        else:
            os.environ[CACHE_ENV] = saved


def test_smollm2_greedy_continuation_equals_transformers(smollm2: Path, runner: Runner) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(smollm2)
    chat = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Name three colors."}], add_generation_prompt=True, tokenize=False
    )
    prompts = [
        tokenizer("The capital of France is")["input_ids"],
        tokenizer(chat, add_special_tokens=False)["input_ids"],
    ]
    model: Any = AutoModelForCausalLM.from_pretrained(smollm2, dtype=torch.float32)
    model.eval()
    expected = []
    with torch.inference_mode():
        for prompt in prompts:
            ids = torch.tensor([prompt])
            out = model.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=16,
                do_sample=False,
                eos_token_id=None,
                pad_token_id=0,
            )
            expected.append(out[0, len(prompt) :].tolist())
    driver = StandaloneDriver(runner(smollm2, 16))
    assert driver.generate(prompts, 16) == expected
    assert "Paris" in tokenizer.decode(expected[0])


@pytest.mark.usefixtures("unpublished")
def test_a_runner_over_the_default_bags_serves_the_default_model(smollm2: Path) -> None:
    """The default bags published (role standalone, as a test or a tool publishes them): model_path
    unset means the bundled model, dtype auto its bf16, and the pool kv_cache_memory_mb worth of slots."""
    from config_bags import publish
    from config_bags.server import get_memory
    from runtime_runner.kv_pool import kv_bytes_per_token

    publish(Bags(), role="standalone")
    runner = ModelRunner(build_attention_pair)
    assert runner.arch.architecture == "LlamaForCausalLM" and runner.model.dtype == torch.bfloat16
    per_token = kv_bytes_per_token(30, 3, 64, torch.bfloat16)
    assert runner.pool.num_slots == get_memory().kv_cache_memory_mb * 1024 * 1024 // per_token
    assert runner.context_length == 8192
    outputs = StandaloneDriver(runner).generate([[1, 504, 3458]], 3)
    assert len(outputs[0]) == 3 and all(0 <= t < 49152 for t in outputs[0])
