"""The runner, deterministic by default on a CPU, computes a sequence's logits bitwise the same
however it is run: alone with its whole prompt in one step, among others with every prompt cut into
7-token chunks (extends over cached keys, mixed with decodes), and after a retraction (the sequence
dropped after some tokens and its prompt plus output recomputed as a new prompt). bf16 tiny
checkpoints of each architecture, so rounding differs wherever a kernel reduces by the batch.

Reverse-verified by hand: with enable_deterministic_inference=False (oneDNN/aten matmuls, SDPA
prompts) every architecture fails the batched comparison."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from attn_backends import build_attention_pair
from config_bags import publish
from config_bags.server import Bags, MemoryBag, ModelBag, ScheduleBag
from runtime_runner.runner import ModelRunner
from runtime_runner.standalone import Running, StandaloneDriver

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
PROMPT_LENGTHS = (3, 11, 26, 40, 300)
NEW_TOKENS = 6

Logits = list[torch.Tensor]


def _run(driver: StandaloneDriver, prompts: list[list[int]], chunk: int | None) -> list[Logits]:
    """Every prompt together to NEW_TOKENS tokens; each sequence's logits row of every sampled step."""
    seqs = [driver.add(p) for p in prompts]
    rows: dict[str, Logits] = {s.rid: [] for s in seqs}
    while any(len(s.output) < NEW_TOKENS for s in seqs):
        active = list(driver.active)
        before = {s.rid: len(s.output) for s in active}
        out = driver.step(chunk)
        for i, seq in enumerate(active):
            if len(seq.output) > before[seq.rid]:
                rows[seq.rid].append(out.logits[i].clone())
        for seq in seqs:
            if seq in driver.active and len(seq.output) >= NEW_TOKENS:
                driver.finish(seq)
    return [rows[s.rid] for s in seqs]


def _retracted(driver: StandaloneDriver, prompt: list[int], after: int) -> Logits:
    """`prompt` decoded `after` tokens, dropped, then recomputed from prompt + output and finished."""
    first: Running = driver.add(prompt)
    rows: Logits = []
    while len(first.output) < after:
        rows.append(driver.step().logits[0].clone())
    driver.finish(first)
    return rows + _run(driver, [list(first.prompt) + first.output], None)[0][: NEW_TOKENS - after]


@pytest.mark.parametrize("arch", sorted(ARCHITECTURES))
def test_a_sequence_computes_the_same_bits_alone_batched_chunked_and_retracted(
    arch: str, tiny_checkpoint: Callable[..., Path], unpublished: None
) -> None:
    architecture, overrides = ARCHITECTURES[arch]
    model_dir = tiny_checkpoint(architecture, **{**TINY, **overrides})
    publish(
        Bags(
            model=ModelBag(model_path=str(model_dir), dtype="bfloat16"),
            schedule=ScheduleBag(page_size=16, max_prefill_tokens=4096),
            memory=MemoryBag(max_total_tokens=4096),
        ),
        role="standalone",
    )
    runner = ModelRunner(build_attention_pair)
    assert runner.batch_invariant and runner.model.dtype == torch.bfloat16
    gen = torch.Generator().manual_seed(3)
    prompts = [torch.randint(0, TINY["vocab_size"], (n,), generator=gen).tolist() for n in PROMPT_LENGTHS]
    driver = StandaloneDriver(runner)
    alone = [_run(driver, [p], None)[0] for p in prompts]
    batched = _run(driver, prompts, 7)
    for index, (expected, got) in enumerate(zip(alone, batched, strict=True)):
        assert len(got) == NEW_TOKENS and all(torch.equal(a, b) for a, b in zip(expected, got, strict=True)), index
    after = 3
    recomputed = _retracted(driver, prompts[1], after)
    assert len(recomputed) == NEW_TOKENS and all(torch.equal(a, b) for a, b in zip(alone[1], recomputed, strict=True))
