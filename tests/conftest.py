"""Tiny random checkpoints and standalone runners over them, shared by the runner's cross-package tests.

Test modules do not import conftest: they ask for these fixtures by name. Nothing here is autouse,
so the other tests of this folder run as before. (serve_testing's tiny checkpoint is a Llama with a
trained tokenizer at fixed sizes for the end-to-end server; these tests need Llama, Qwen2 and Qwen3
at their own sizes and no tokenizer, so they build their own.) One server of the real default
model is shared by the end-to-end modules that take it as it is (`default_model_server`).

Without a GPU the triton attention kernels run in Triton's interpreter, chosen when `@triton.jit`
is applied: TRITON_INTERPRET is set here, before anything imports them.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from attn_backends import build_attention_pair  # noqa: E402
from config_bags import publish, unpublish
from config_bags.server import Bags, ExecBag, MemoryBag, ModelBag, ScheduleBag
from runtime_runner.attention_seam import AttentionPairFactory
from runtime_runner.runner import ModelRunner
from serve_testing.server import ServerProcess

# The sizes every tiny checkpoint starts from; a test overrides what it needs.
SMALL = dict(
    vocab_size=64,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=128,
)


def _save_tiny_checkpoint(target: Path, architecture: str, shard: str | None, overrides: dict[str, Any]) -> Path:
    """A random `architecture` (e.g. "Qwen3ForCausalLM") with SMALL sizes and `overrides`, drawn
    after seeding torch with 0 and saved in `target`; `shard` caps each safetensors file's size."""
    transformers: Any = importlib.import_module("transformers")  # its stubs do not type these classes
    config_cls = getattr(transformers, architecture.replace("ForCausalLM", "Config"))
    torch.manual_seed(0)
    model = getattr(transformers, architecture)(config_cls(**{**SMALL, **overrides}))
    model.save_pretrained(target, **({} if shard is None else {"max_shard_size": shard}))
    return target


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """`make(architecture, *, shard=None, **overrides)`: the directory of a tiny random checkpoint
    (see `_save_tiny_checkpoint`), saved once per session for each distinct request. Sharing is
    safe: the runner and transformers only read a checkpoint directory.

    Reverse-verified: keying on the architecture alone hands the sharded Llama of test_runner_parity
    the unsharded one, and its shard check fails."""
    saved: dict[str, Path] = {}

    def make(architecture: str, *, shard: str | None = None, **overrides: Any) -> Path:
        key = json.dumps([architecture, shard, overrides], sort_keys=True)
        if key not in saved:
            target = tmp_path_factory.mktemp(f"tiny-{architecture}")
            saved[key] = _save_tiny_checkpoint(target, architecture, shard, overrides)
        return saved[key]

    return make


def budgets_within(schedule: ScheduleBag, pool: int | None) -> ScheduleBag:
    """`schedule` with its chunk and prefill budget lowered to `pool` tokens where they exceed it."""
    if pool is None:
        return schedule
    chunk = schedule.chunked_prefill_size
    return msgspec.structs.replace(
        schedule,
        chunked_prefill_size=chunk if chunk == -1 else min(chunk, pool),
        max_prefill_tokens=min(schedule.max_prefill_tokens, pool),
    )


@pytest.fixture(scope="session")
def default_model_server() -> Iterator[ServerProcess]:
    """`serve` on the real default model with its defaults (an 8192-token KV pool), started once
    for the modules that take it as it is."""
    running = ServerProcess(None, "--max-total-tokens", "8192")
    try:
        running.wait_ready(timeout_s=420)
        yield running
    finally:
        running.stop()


@pytest.fixture
def unpublished() -> Iterator[None]:
    """Nothing published when the test starts, and nothing left published when it ends."""
    unpublish()
    yield
    unpublish()


@pytest.fixture
def standalone_runner(unpublished: None) -> Callable[..., ModelRunner]:
    """`build(model_dir, *, factory=build_attention_pair, context_length=None, schedule=None,
    memory=None, exec=None)`: publish (role standalone) fp32 bags serving `model_dir`, with the
    bags given (the defaults where None), then build a ModelRunner through `factory`. A small
    pool gets prefill budgets that fit it (the `chunk_fits_pool` and `prefill_budget_fits_pool`
    rules), as serve's resolution declares them. Unpublished at teardown."""

    def build(
        model_dir: Path,
        *,
        factory: AttentionPairFactory = build_attention_pair,
        context_length: int | None = None,
        schedule: ScheduleBag | None = None,
        memory: MemoryBag | None = None,
        exec: ExecBag | None = None,
    ) -> ModelRunner:
        memory = memory or MemoryBag()
        schedule = budgets_within(schedule or ScheduleBag(), memory.max_total_tokens)
        publish(
            Bags(
                model=ModelBag(model_path=str(model_dir), dtype="float32", context_length=context_length),
                schedule=schedule,
                memory=memory,
                exec=exec or ExecBag(),
            ),
            role="standalone",
        )
        return ModelRunner(factory)

    return build
