"""Every test starts and ends unpublished; tiny random checkpoints are built with transformers."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

import config_bags

os.environ.setdefault("HF_HUB_OFFLINE", "1")

TINY = dict(
    vocab_size=96,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    initializer_range=0.1,
)

CheckpointMaker = Callable[..., Path]


@pytest.fixture(autouse=True)
def _unpublished() -> Iterator[None]:
    config_bags.unpublish()
    yield
    config_bags.unpublish()


def tiny_model(architecture: str, **overrides: Any) -> Any:
    """A random transformers model of `architecture` with tiny sizes (fp32, eval mode)."""
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

    classes = {
        "LlamaForCausalLM": (LlamaConfig, LlamaForCausalLM),
        "Qwen2ForCausalLM": (Qwen2Config, Qwen2ForCausalLM),
        "Qwen3ForCausalLM": (Qwen3Config, Qwen3ForCausalLM),
    }
    config_cls, model_cls = classes[architecture]
    extra = {"head_dim": 16} if architecture == "Qwen3ForCausalLM" else {}
    torch.manual_seed(0)
    return model_cls(config_cls(**{**TINY, **extra, **overrides})).eval()


@pytest.fixture
def make_model() -> Callable[..., Any]:
    """`tiny_model` as a fixture (test modules do not import conftest)."""
    return tiny_model


@pytest.fixture
def make_checkpoint(tmp_path: Path) -> CheckpointMaker:
    """Save a tiny random model of an architecture; answers its directory."""

    def make(architecture: str, *, shard: str | None = None, **overrides: Any) -> Path:
        target = tmp_path / f"{architecture}-{len(list(tmp_path.iterdir()))}"
        model = tiny_model(architecture, **overrides)
        if shard is None:
            model.save_pretrained(target)
        else:
            model.save_pretrained(target, max_shard_size=shard)
        return target

    return make
