"""The native step (the whole decoder forward in one C++ call) computes exactly what the op-by-op
forward computes: every sampled logits row and every K/V written into the pool, bitwise, for each
Llama-family layout (Llama; Qwen2's q/k/v biases; Qwen3's per-head q/k norms), in bf16 and fp32,
and in fp32 over a bf16 KV cache, over prompts cut into 7-token chunks that extend over cached keys beside decodes.

Reverse-verified by hand: with native_step.cpp's q norm applied after the rotary instead of
before it, the Qwen3 cases fail; with the KV copy writing each row's first head for every head, every
case of the first test fails; with the bf16 rounding of new keys truncating instead of rounding to
nearest even, the fp32-over-bf16 cases fail."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from attn_backends import build_attention_pair
from config_bags import publish, unpublish
from config_bags.server import Bags, ExecBag, KernelBag, MemoryBag, ModelBag, ScheduleBag
from runtime_runner.runner import ModelRunner
from runtime_runner.standalone import StandaloneDriver

TINY: dict[str, Any] = dict(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    initializer_range=0.2,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)
ARCHITECTURES = {
    "llama": ("LlamaForCausalLM", {}),
    "qwen2": ("Qwen2ForCausalLM", {}),
    "qwen3": ("Qwen3ForCausalLM", {"head_dim": 16}),
}
PROMPTS = [[(7 * i + 3 * j) % 250 + 1 for j in range(length)] for i, length in enumerate((3, 11, 26, 40))]
NEW_TOKENS = 5


def _runner(model_dir: Path, dtype: str, *, deterministic: bool = True, kv_dtype: str = "auto") -> ModelRunner:
    unpublish()
    publish(
        Bags(
            model=ModelBag(model_path=str(model_dir), dtype=dtype),
            schedule=ScheduleBag(page_size=4, chunked_prefill_size=-1, max_prefill_tokens=512),
            memory=MemoryBag(max_total_tokens=512, kv_cache_dtype=kv_dtype),
            exec=ExecBag(kernel=KernelBag(enable_deterministic_inference=deterministic)),
        ),
        role="standalone",
    )
    return ModelRunner(build_attention_pair)


def _logits_of(runner: ModelRunner) -> list[torch.Tensor]:
    """Every prompt together, 7-token chunks, to NEW_TOKENS tokens each: every step's logits."""
    driver = StandaloneDriver(runner)
    seqs = [driver.add(p) for p in PROMPTS]
    rows: list[torch.Tensor] = []
    while any(len(s.output) < NEW_TOKENS for s in seqs):
        rows.append(driver.step(7).logits.clone())
        for seq in seqs:
            if seq in driver.active and len(seq.output) >= NEW_TOKENS:
                driver.finish(seq)
    return rows


@pytest.mark.parametrize(("dtype", "kv_dtype"), [("bfloat16", "auto"), ("float32", "auto"), ("float32", "bfloat16")])
@pytest.mark.parametrize("name", list(ARCHITECTURES))
def test_the_native_step_computes_the_op_by_op_forward_bitwise(
    name: str, dtype: str, kv_dtype: str, tiny_checkpoint: Callable[..., Path], unpublished: None
) -> None:
    architecture, overrides = ARCHITECTURES[name]
    model_dir = tiny_checkpoint(architecture, **{**TINY, **overrides})
    op_by_op = _runner(model_dir, dtype, kv_dtype=kv_dtype)
    op_by_op.native_step = None
    native = _runner(model_dir, dtype, kv_dtype=kv_dtype)
    assert native.native_step is not None
    assert native.pool.dtype == (torch.bfloat16 if kv_dtype == "bfloat16" else native.model.dtype)
    before = native.native_step.forwards
    expected, got = _logits_of(op_by_op), _logits_of(native)
    assert native.native_step.forwards - before == len(got)  # every forward of the run went through the step
    assert len(expected) == len(got)
    for step, (a, b) in enumerate(zip(expected, got, strict=True)):
        assert torch.equal(a, b), f"{name} {dtype}: step {step}'s logits differ"
    for layer in range(len(native.pool.k)):
        assert torch.equal(op_by_op.pool.k[layer], native.pool.k[layer]), f"{name} {dtype}: layer {layer}'s keys differ"
        assert torch.equal(op_by_op.pool.v[layer], native.pool.v[layer]), (
            f"{name} {dtype}: layer {layer}'s values differ"
        )


def test_a_runner_whose_projections_have_no_c_entry_runs_op_by_op(
    tiny_checkpoint: Callable[..., Path], unpublished: None
) -> None:
    """oneDNN's packed linear (deterministic inference off) has no C entry: no native step."""
    model_dir = tiny_checkpoint("LlamaForCausalLM", **TINY)
    assert _runner(model_dir, "float32", deterministic=False).native_step is None
