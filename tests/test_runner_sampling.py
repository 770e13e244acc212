"""Sampling through the whole runner: a seeded request draws the same tokens whatever it is batched
with, and the reported logprobs are those of the logits the forward answers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from config_bags.server import MemoryBag, ScheduleBag
from runtime_runner.runner import ModelRunner
from runtime_runner.standalone import Sampling, StandaloneDriver


@pytest.fixture
def driver(tiny_checkpoint: Callable[..., Path], standalone_runner: Callable[..., ModelRunner]) -> StandaloneDriver:
    return StandaloneDriver(
        standalone_runner(
            tiny_checkpoint("Qwen2ForCausalLM", vocab_size=80),
            schedule=ScheduleBag(page_size=4),
            memory=MemoryBag(max_total_tokens=512),
        )
    )


def test_same_seed_same_tokens_alone_or_batched(driver: StandaloneDriver) -> None:
    """Reverse-verified: drawing seeded rows from the runner's shared generator makes the batched
    run differ from the lone one."""
    seeded = Sampling(temperature=1.5, top_p=0.95, seed=42)
    alone = driver.generate([[3, 1, 4, 1, 5]], 12, sampling=seeded)[0]
    companions = [
        driver.add([2, 7, 1], Sampling(temperature=1.0)),
        driver.add([9, 9, 9, 9, 9, 9, 9], Sampling(temperature=1.0)),
    ]
    again = driver.generate([[3, 1, 4, 1, 5]], 12, sampling=seeded)[0]
    for seq in companions:
        driver.finish(seq)
    other_seed = driver.generate([[3, 1, 4, 1, 5]], 12, sampling=Sampling(temperature=1.5, top_p=0.95, seed=43))[0]
    assert again == alone
    assert other_seed != alone


def test_logprobs_are_those_of_the_answered_logits(driver: StandaloneDriver) -> None:
    driver.add([5, 6, 7, 8], Sampling(logprobs=True, top_logprobs=4))
    driver.add([1, 2], Sampling(temperature=0.8, seed=1, logprobs=True))
    driver.add([4], Sampling())
    out = driver.step()
    logprobs = torch.log_softmax(out.logits, -1)
    for row, token in enumerate(out.next_token_ids[:2]):
        assert out.next_token_logprobs[row] == pytest.approx(logprobs[row, token].item(), abs=1e-6)
    top = out.top_logprobs[0]
    assert top is not None and [t for t, _ in top] == logprobs[0].topk(4).indices.tolist()
    assert out.next_token_ids[0] == top[0][0]  # greedy picks the most likely token
    assert out.next_token_logprobs[2] is None and out.top_logprobs[1] is None and out.top_logprobs[2] is None
