"""Tensor parallelism in the runner: two ranks in two processes over gloo, each holding half of a
tiny model, compute what one process holding all of it computes.

Two checkpoints cover the layouts a split meets: a Llama with every bias (q|k|v and gate|up
biases sliced by rows, o and down biases added once after the sum) whose 2 KV heads split one per
rank, under deterministic inference (the rank-ordered sum); and a Qwen3 with q/k norms and a tied
LM head whose one KV head both ranks hold (replicated), without it (torch.distributed's
all_reduce). Both have a vocabulary of 67, which 2 ranks split unevenly (the padded LM head).

The tolerance: only o and down differ from one process, where each rank's fp32 dot product runs
over half of the input columns and the two halves are added after; that regroups the sum's
roundings (the embedding gather and the LM head's columns are computed whole, by one rank each),
giving differences near 1e-5 on logits of about 10 here. 1e-4 bounds them, and every greedy step
of the reference has a top-1 margin above twice that, so no tolerated difference can change a token.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from serve_testing.tensor_parallel_ranks import GreedyRun, RunnerCase, greedy_run, run_ranks

pytestmark = pytest.mark.timeout(600)

WIDE: dict[str, Any] = dict(
    vocab_size=67,
    hidden_size=64,
    intermediate_size=128,
    num_attention_heads=4,
    max_position_embeddings=256,
    initializer_range=0.5,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)
# Drawn at random, kept for their top-1 margins (at least 0.2 at every step of both models).
PROMPTS = ((51, 50, 6, 48, 35, 9, 44), (7, 9, 23, 53))
STEPS = 6
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def cases(tiny_checkpoint: Callable[..., Path]) -> list[RunnerCase]:
    llama = tiny_checkpoint("LlamaForCausalLM", **WIDE, num_key_value_heads=2, attention_bias=True, mlp_bias=True)
    qwen3 = tiny_checkpoint("Qwen3ForCausalLM", **WIDE, num_key_value_heads=1, head_dim=16, tie_word_embeddings=True)
    return [
        RunnerCase(model_path=str(llama), deterministic=True),
        RunnerCase(model_path=str(qwen3), deterministic=False),
    ]


@pytest.fixture(scope="module")
def one_process(cases: list[RunnerCase]) -> list[GreedyRun]:
    return [greedy_run(case, PROMPTS, STEPS, tp_size=1) for case in cases]


@pytest.fixture(scope="module")
def two_ranks(cases: list[RunnerCase]) -> list[list[GreedyRun]]:
    return run_ranks(cases, PROMPTS, STEPS, tp_size=2)


def test_two_ranks_greedy_equals_one_process_and_logits_agree(
    cases: list[RunnerCase], one_process: list[GreedyRun], two_ranks: list[list[GreedyRun]]
) -> None:
    """Reverse-verified: with RowParallel's sum left out (each rank's partial product used as the
    whole), the logits differed by about 20 and the tokens differed; with the LM head's gathered
    columns in the wrong order (ranks reversed), likewise."""
    for index, case in enumerate(cases):
        reference = one_process[index]
        for step, logits in enumerate(reference.logits):
            top = torch.tensor(logits).topk(2, dim=-1).values
            margin = float((top[:, 0] - top[:, 1]).min())
            assert margin > 2 * TOLERANCE, (
                f"{case.model_path} step {step}: top-1 margin {margin} is too thin to compare greedy tokens"
            )
        split = two_ranks[0][index]
        assert split.tokens == reference.tokens, case
        difference = max(
            float((torch.tensor(a) - torch.tensor(b)).abs().max())
            for a, b in zip(split.logits, reference.logits, strict=True)
        )
        assert difference <= TOLERANCE, f"{case.model_path}: logits differ by {difference}"


def test_every_rank_samples_the_same_tokens_from_the_same_logits(two_ranks: list[list[GreedyRun]]) -> None:
    """Every rank gathers the whole vocabulary's logits, bit for bit the same, so each samples the
    token the others sample (the scheduler of each rank then stays in step with the others).

    Reverse-verified: with the LM head answering each rank's own vocabulary slice (no gather),
    the two ranks sampled different tokens from the first step on."""
    first, second = two_ranks
    for mine, theirs in zip(first, second, strict=True):
        assert mine.tokens == theirs.tokens
        assert mine.logits == theirs.logits
