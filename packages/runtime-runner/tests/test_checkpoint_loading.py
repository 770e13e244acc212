"""Loading checkpoints: the architecture registry, shape checks, sharded files, fused weights."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from runtime_runner.errors import CheckpointError, UnsupportedArchitectureError, UnsupportedConfigError
from runtime_runner.kernels.packed_linear import PackedLinear
from runtime_runner.loading.arch_config import read_arch_config
from runtime_runner.models.architectures import MODEL_CLASSES, model_class_for
from runtime_runner.models.decoder import DecoderForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM

CheckpointMaker = Callable[..., Path]


def _load(model_dir: Path) -> DecoderForCausalLM:
    cfg = read_arch_config(model_dir)
    model = model_class_for(cfg.architecture).load(
        model_dir, cfg, torch.float32, torch.device("cpu"), batch_invariant=False
    )
    assert isinstance(model, DecoderForCausalLM)  # these tests load Llama-family checkpoints
    return model


def test_registry_names_every_supported_architecture() -> None:
    assert sorted(MODEL_CLASSES) == [
        "LlamaForCausalLM",
        "Qwen2ForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3NextForCausalLM",
        "Qwen3_5ForCausalLM",
    ]
    with pytest.raises(
        UnsupportedArchitectureError,
        match=(
            "'GPT2LMHeadModel'.*LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3NextForCausalLM, "
            "Qwen3_5ForCausalLM"
        ),
    ):
        model_class_for("GPT2LMHeadModel")


def test_unknown_architecture_in_a_checkpoint_is_refused(make_checkpoint: CheckpointMaker) -> None:
    model_dir = make_checkpoint("LlamaForCausalLM")
    config = json.loads((model_dir / "config.json").read_text())
    config["architectures"] = ["MistralForCausalLM"]
    (model_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedArchitectureError, match="MistralForCausalLM.*supported: LlamaForCausalLM"):
        _load(model_dir)


def test_missing_tensor_is_named(make_checkpoint: CheckpointMaker) -> None:
    """Reverse-verified: without the presence check in CheckpointReader.read this surfaces as
    FileNotFoundError: None."""
    model_dir = make_checkpoint("LlamaForCausalLM")
    tensors = load_file(model_dir / "model.safetensors")
    del tensors["model.layers.1.mlp.up_proj.weight"]
    save_file(tensors, model_dir / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(
        CheckpointError, match=r"lacks tensor 'model.layers.1.mlp.up_proj.weight' \(expected shape \[96, 64\]\)"
    ):
        _load(model_dir)


def test_mis_shaped_tensor_names_both_shapes(make_checkpoint: CheckpointMaker) -> None:
    """Reverse-verified: without the shape check the mis-shaped k_proj loads silently (fused into QKV)."""
    model_dir = make_checkpoint("Qwen2ForCausalLM")
    tensors = load_file(model_dir / "model.safetensors")
    tensors["model.layers.0.self_attn.k_proj.weight"] = torch.zeros(24, 64)
    save_file(tensors, model_dir / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(
        CheckpointError,
        match=r"'model.layers.0.self_attn.k_proj.weight' has shape \[24, 64\]; the config implies \[32, 64\]",
    ):
        _load(model_dir)


def test_sharded_checkpoint_loads_the_same_weights(make_checkpoint: CheckpointMaker) -> None:
    whole = make_checkpoint("LlamaForCausalLM")
    sharded = make_checkpoint("LlamaForCausalLM", shard="40KB")
    assert len(list(sharded.glob("*.safetensors"))) > 1 and (sharded / "model.safetensors.index.json").is_file()
    a, b = _load(whole), _load(sharded)
    assert isinstance(a, model_class_for("LlamaForCausalLM")) and isinstance(b, type(a))
    for la, lb in zip(
        a.projections, b.projections, strict=True
    ):  # the decoder keeps each matrix in its projection only
        for pa, pb in ((la.qkv, lb.qkv), (la.o, lb.o), (la.gate_up, lb.gate_up), (la.down, lb.down)):
            assert isinstance(pa, PackedLinear) and isinstance(pb, PackedLinear) and torch.equal(pa.plain, pb.plain)


def test_architecture_traits_follow_the_checkpoint(make_checkpoint: CheckpointMaker) -> None:
    """Qwen2 carries q/k/v biases, Qwen3 q/k norms, tied embeddings share the LM head."""
    qwen2 = _load(make_checkpoint("Qwen2ForCausalLM", tie_word_embeddings=True))
    assert isinstance(qwen2, Qwen2ForCausalLM)
    assert qwen2.weights.layers[0].qkv_bias is not None and qwen2.weights.layers[0].o_bias is None
    assert qwen2.weights.lm_head is qwen2.weights.embed
    qwen3 = _load(make_checkpoint("Qwen3ForCausalLM"))
    assert isinstance(qwen3, Qwen3ForCausalLM)
    assert qwen3.weights.layers[0].q_norm is not None and qwen3.weights.layers[0].qkv_bias is None


def test_unsupported_rope_type_lists_the_supported_ones(make_checkpoint: CheckpointMaker) -> None:
    model_dir = make_checkpoint("LlamaForCausalLM")
    config = json.loads((model_dir / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "longrope", "rope_theta": 10000.0}
    (model_dir / "config.json").write_text(json.dumps(config))
    with pytest.raises(UnsupportedConfigError, match="'longrope'.*default, linear, llama3, yarn"):
        _load(model_dir)
