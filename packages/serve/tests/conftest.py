"""Fixtures shared by serve's tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from config_bags import unpublish
from serve_testing.tiny_checkpoint import build_tokenizer

LAYERS, KV_HEADS, HEAD_DIM, MAX_POSITIONS = 2, 2, 16, 512


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random Llama checkpoint in bfloat16 (transformers' own writer) with a tokenizer:
    what resolution reads of a model (config.json, the safetensors headers, tokenizer.json)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    path = tmp_path_factory.mktemp("models") / "tiny-llama"
    build_tokenizer(path, vocab_size=256)
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=LAYERS,
        num_attention_heads=4,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=MAX_POSITIONS,
        vocab_size=256,
        dtype="bfloat16",
        architectures=["LlamaForCausalLM"],
    )
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(path)
    return path


@pytest.fixture
def unpublished() -> Iterator[None]:
    """Nothing published when the test starts, and nothing left published when it ends."""
    unpublish()
    yield
    unpublish()
