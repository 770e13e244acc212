"""The loader asks an entry class each decision by its hook, takes the default where the class does
not answer, and checks every expected tensor before reading any."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from runtime_runner.errors import CheckpointError
from runtime_runner.loading.arch_config import ArchConfig, read_arch_config
from runtime_runner.loading.checkpoint_layout import TensorSpec, WeightLayout, layout_tensors
from runtime_runner.loading.loader_hooks import (
    LOADER_HOOKS,
    FusedProjections,
    LoaderDecisions,
    decisions_of,
    default_weight_layout,
)
from runtime_runner.models.decoder import LlamaForCausalLM, Qwen3ForCausalLM, TargetDecoder
from runtime_runner.models.matrix_projection import ConcatProjection

CheckpointMaker = Callable[..., Path]
CPU = torch.device("cpu")


class AnswersNothing(TargetDecoder):
    """An entry class that forgot every hook."""

    architecture = "LlamaForCausalLM"


class AnswersEverything(TargetDecoder):
    """Every hook answered otherwise than the default."""

    architecture = "LlamaForCausalLM"

    @classmethod
    def weight_layout(cls, cfg: ArchConfig) -> WeightLayout:
        return WeightLayout(qkv_bias=True, o_bias=False, mlp_bias=False, qk_norm=True)

    @classmethod
    def fused_projections(cls, cfg: ArchConfig) -> FusedProjections:
        return FusedProjections(qkv=True, gate_up=False)

    @classmethod
    def tied_embeddings(cls, cfg: ArchConfig) -> bool:
        return not cfg.tie_word_embeddings

    @classmethod
    def expected_tensors(cls, cfg: ArchConfig) -> tuple[TensorSpec, ...]:
        return (TensorSpec("model.norm.weight", (cfg.hidden_size,)),)


class AnswersWrongly(TargetDecoder):
    """An answer that is not a decision of its hook's kind."""

    architecture = "LlamaForCausalLM"

    @classmethod
    def tied_embeddings(cls, cfg: ArchConfig) -> str:
        return "yes"


def test_the_hooks_are_the_decisions() -> None:
    assert LOADER_HOOKS == ("weight_layout", "fused_projections", "tied_embeddings", "expected_tensors")


def test_every_hook_is_asked(make_checkpoint: CheckpointMaker) -> None:
    cfg = read_arch_config(make_checkpoint("LlamaForCausalLM"))
    decisions = decisions_of(AnswersEverything, cfg)
    for hook in LOADER_HOOKS:
        assert getattr(decisions, hook) == getattr(AnswersEverything, hook)(cfg), hook


def test_a_class_answering_no_hook_takes_every_default(make_checkpoint: CheckpointMaker) -> None:
    """Nothing fused by default: each group runs one matmul per checkpoint projection, to the same logits."""
    model_dir = make_checkpoint("LlamaForCausalLM", attention_bias=True, mlp_bias=True)
    cfg = read_arch_config(model_dir)
    layout = default_weight_layout(cfg)
    assert decisions_of(AnswersNothing, cfg) == LoaderDecisions(
        weight_layout=layout,
        fused_projections=FusedProjections(qkv=False, gate_up=False),
        tied_embeddings=False,
        expected_tensors=layout_tensors(cfg, layout, False),
    )
    bare = AnswersNothing.load(model_dir, cfg, torch.float32, CPU, batch_invariant=False)
    llama = LlamaForCausalLM.load(model_dir, cfg, torch.float32, CPU, batch_invariant=False)
    assert isinstance(bare._projections[0].qkv, ConcatProjection) and len(bare._projections[0].qkv.parts) == 3
    assert not isinstance(llama._projections[0].qkv, ConcatProjection)
    ids, positions = torch.arange(12), torch.arange(12)

    def causal(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.scaled_dot_product_attention(
            q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True, enable_gqa=True
        ).transpose(0, 1)

    with torch.inference_mode():
        torch.testing.assert_close(
            bare.logits(bare.hidden_states(ids, positions, causal)),
            llama.logits(llama.hidden_states(ids, positions, causal)),
            atol=1e-5,
            rtol=1e-5,
        )


def test_an_answer_of_the_wrong_kind_names_the_class_and_hook(make_checkpoint: CheckpointMaker) -> None:
    cfg = read_arch_config(make_checkpoint("LlamaForCausalLM"))
    with pytest.raises(TypeError, match="AnswersWrongly.tied_embeddings answered 'yes'; accepted: a bool"):
        decisions_of(AnswersWrongly, cfg)


def test_every_missing_tensor_is_named_in_one_error(make_checkpoint: CheckpointMaker) -> None:
    model_dir = make_checkpoint("Qwen3ForCausalLM")
    tensors = load_file(model_dir / "model.safetensors")
    for name in ("model.layers.0.self_attn.q_norm.weight", "model.layers.1.mlp.down_proj.weight", "lm_head.weight"):
        del tensors[name]
    save_file(tensors, model_dir / "model.safetensors", metadata={"format": "pt"})
    cfg = read_arch_config(model_dir)
    with pytest.raises(CheckpointError) as refused:
        Qwen3ForCausalLM.load(model_dir, cfg, torch.float32, CPU, batch_invariant=False)
    assert (
        "lacks tensor 'model.layers.0.self_attn.q_norm.weight' (expected shape [16]), "
        "tensor 'model.layers.1.mlp.down_proj.weight' (expected shape [64, 96]), "
        "tensor 'lm_head.weight' (expected shape [96, 64]);"
    ) in str(refused.value)
