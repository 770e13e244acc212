"""Tensor parallelism over NCCL on CUDA: a runner over a one-rank NCCL group runs every sharded
path (the slices, the all_reduce, the vocabulary gather) and must compute what a runner without a
group computes; with two devices, two ranks must too. Skipped without CUDA (CI has none).

The tolerance is tests/test_tensor_parallel_runner.py's (1e-4 on logits of about 10): over one rank
the collectives add nothing, over two the o and down sums regroup their roundings.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from serve_testing.tensor_parallel_ranks import GreedyRun, RunnerCase, greedy_run, run_ranks

pytestmark = [
    pytest.mark.timeout(600),
    pytest.mark.skipif(
        not torch.cuda.is_available() or not torch.distributed.is_nccl_available(), reason="needs CUDA and NCCL"
    ),
]

WIDE: dict[str, Any] = dict(
    vocab_size=67,
    hidden_size=64,
    intermediate_size=128,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    initializer_range=0.5,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)
PROMPTS = ((51, 50, 6, 48, 35, 9, 44), (7, 9, 23, 53))
STEPS = 6
TOLERANCE = 1e-4


def assert_same(split: GreedyRun, whole: GreedyRun) -> None:
    assert split.tokens == whole.tokens
    difference = max(
        float((torch.tensor(a) - torch.tensor(b)).abs().max()) for a, b in zip(split.logits, whole.logits, strict=True)
    )
    assert difference <= TOLERANCE, f"logits differ by {difference}"


@pytest.fixture(scope="module")
def case(tiny_checkpoint: Callable[..., Path]) -> RunnerCase:
    # CUDA has no batch-invariant kernels here: deterministic inference off, the all_reduce path.
    return RunnerCase(model_path=str(tiny_checkpoint("LlamaForCausalLM", **WIDE)), deterministic=False)


def test_a_one_rank_nccl_group_computes_what_no_group_computes(case: RunnerCase) -> None:
    whole = greedy_run(case, PROMPTS, STEPS, tp_size=1)
    (split,) = run_ranks([case], PROMPTS, STEPS, tp_size=1, backend="nccl")[0]
    assert_same(split, whole)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_two_nccl_ranks_compute_what_one_process_computes(case: RunnerCase) -> None:
    whole = greedy_run(case, PROMPTS, STEPS, tp_size=1)
    first, second = run_ranks([case], PROMPTS, STEPS, tp_size=2, backend="nccl")
    assert_same(first[0], whole)
    assert first == second
