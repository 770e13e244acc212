"""exec.graph.enable_torch_compile: the one-request decode step runs through a compiled graph,
token for token what transformers generates, compiled once for every sequence length."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch

from config_bags.server import ExecBag, GraphBag, ScheduleBag
from runtime_runner.runner import ModelRunner
from runtime_runner.standalone import StandaloneDriver

NEW_TOKENS = 12


def _reference(model_dir: Path, prompt: list[int]) -> list[int]:
    from transformers import AutoModelForCausalLM

    model: Any = AutoModelForCausalLM.from_pretrained(
        model_dir, dtype=torch.float32
    )  # eval mode; its stubs mistype generate()
    with torch.inference_mode():
        out = model.generate(
            torch.tensor([prompt]), max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False
        )
    return list(out[0, len(prompt) :].tolist())


@pytest.mark.parametrize(("architecture", "page_size"), [("Qwen2ForCausalLM", 1), ("Qwen3ForCausalLM", 16)])
def test_compiled_decode_matches_transformers_and_compiles_once(
    architecture: str,
    page_size: int,
    tiny_checkpoint: Callable[..., Path],
    standalone_runner: Callable[..., ModelRunner],
) -> None:
    """Qwen2 (q/k/v biases, one rotary over q and k) and Qwen3 (per-head q/k norms): prompts of two
    lengths, each decoded alone through the compiled graph, give transformers' greedy tokens; the
    graph compiled while the runner was built serves every length without compiling again; a
    two-request decode stays on the eager path.

    Reverse-verified: compiling with automatic dynamic shapes (`dynamic=None`, no symbolic key
    count) fails here with a recompile error, and so does dropping the spare page-table column of
    the CPU decode kernel's plan (page size 16: a one-page table, then a two-page one); routing
    decodes around the graph fails the step count."""
    extra: dict[str, Any] = {"head_dim": 8} if architecture == "Qwen3ForCausalLM" else {}
    model_dir = tiny_checkpoint(architecture, **extra)
    runner = standalone_runner(
        model_dir, schedule=ScheduleBag(page_size=page_size), exec=ExecBag(graph=GraphBag(enable_torch_compile=True))
    )
    assert runner.compiled_decode_steps == 1  # the warm-up step, taken while the runner was built
    prompts = [[5, 17, 33, 2, 9, 41, 7], [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2, 3, 8, 4, 6, 2, 6, 4, 3]]
    for prompt in prompts:
        with torch._dynamo.config.patch(error_on_recompile=True):
            got = StandaloneDriver(runner).generate([prompt], NEW_TOKENS)[0]
        assert got == _reference(model_dir, prompt)
    assert runner.compiled_decode_steps == 1 + len(prompts) * (NEW_TOKENS - 1)
    StandaloneDriver(runner).generate(prompts, 3)
    assert runner.compiled_decode_steps == 1 + len(prompts) * (NEW_TOKENS - 1)
