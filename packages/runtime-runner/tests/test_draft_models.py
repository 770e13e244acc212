"""Draft entry classes: a draft loads its family's checkpoints as its target does, and shares the
target's embedding and LM head when its own are bitwise equal or absent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from runtime_runner.errors import CheckpointError, UnsupportedArchitectureError, UnsupportedConfigError
from runtime_runner.kernels.packed_linear import PackedLinear
from runtime_runner.loading.arch_config import read_arch_config
from runtime_runner.loading.checkpoint_layout import EMBED, LM_HEAD
from runtime_runner.models.architectures import DRAFT_CLASSES, draft_class_for, model_class_for
from runtime_runner.models.decoder import DecoderForCausalLM
from runtime_runner.models.drafts import DraftDecoder

CheckpointMaker = Callable[..., Path]
CPU = torch.device("cpu")
# conftest's TINY sizes: vocab 96, hidden 64; fp32
MATRIX_BYTES = 96 * 64 * 4


def _target(model_dir: Path, *, batch_invariant: bool = False) -> DecoderForCausalLM:
    cfg = read_arch_config(model_dir)
    return model_class_for(cfg.architecture).load(model_dir, cfg, torch.float32, CPU, batch_invariant=batch_invariant)


def _draft(model_dir: Path, target: DecoderForCausalLM, *, batch_invariant: bool = False) -> DraftDecoder:
    cfg = read_arch_config(model_dir)
    return draft_class_for(cfg.architecture).load(
        model_dir, cfg, torch.float32, CPU, batch_invariant=batch_invariant, target=target
    )


def _dense_causal(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True, enable_gqa=True
    )
    return out.transpose(0, 1)


def _logits(model: DecoderForCausalLM) -> torch.Tensor:
    ids = torch.randint(0, 96, (24,), generator=torch.Generator().manual_seed(3))
    with torch.inference_mode():
        return model.logits(model.hidden_states(ids, torch.arange(ids.shape[0]), _dense_causal))


def _without(model_dir: Path, *names: str) -> Path:
    tensors = load_file(model_dir / "model.safetensors")
    for name in names:
        del tensors[name]
    save_file(tensors, model_dir / "model.safetensors", metadata={"format": "pt"})
    return model_dir


def _with_random_vectors(model_dir: Path) -> Path:
    """The checkpoint with every bias and norm weight redrawn: transformers initializes biases to
    zero and norms to one, under which a layout that drops a bias would still give equal logits."""
    tensors = load_file(model_dir / "model.safetensors")
    generator = torch.Generator().manual_seed(4)
    for name, tensor in tensors.items():
        if tensor.dim() == 1:
            noise = 0.5 * torch.randn(tensor.shape, generator=generator)
            tensors[name] = 1 + noise if "norm" in name else noise
    save_file(tensors, model_dir / "model.safetensors", metadata={"format": "pt"})
    return model_dir


def test_the_registry_has_a_draft_class_per_family() -> None:
    assert sorted(DRAFT_CLASSES) == [
        "LlamaForCausalLM",
        "Qwen2ForCausalLM",
        "Qwen3ForCausalLM",
        "Qwen3NextForCausalLM",
        "Qwen3_5ForCausalLM",
    ]
    with pytest.raises(
        UnsupportedArchitectureError, match="'GPT2LMHeadModel' has no draft.*LlamaForCausalLM, Qwen2ForCausalLM"
    ):
        draft_class_for("GPT2LMHeadModel")


@pytest.mark.parametrize("batch_invariant", [False, True])
def test_a_draft_of_the_targets_checkpoint_shares_embedding_and_head(
    batch_invariant: bool, make_checkpoint: CheckpointMaker
) -> None:
    """Untied: the embedding, the LM head matrix and the head's packed copy are the target's."""
    model_dir = make_checkpoint("LlamaForCausalLM")
    target = _target(model_dir, batch_invariant=batch_invariant)
    draft = _draft(model_dir, target, batch_invariant=batch_invariant)
    assert draft.weights.embed is target.weights.embed and draft.weights.lm_head is target.weights.lm_head
    assert draft.head_projection is target.head_projection
    head = target.head_projection
    if isinstance(head, PackedLinear):
        packed = 0 if head.packed is None else int(torch.ops.mkldnn._nbytes(head.packed))
    else:  # the invariant kernel's panels: 96 columns in 6 panels of 16, fp32, no bias
        packed = MATRIX_BYTES
    assert draft.bytes_shared_with_target == 2 * MATRIX_BYTES + packed > 0
    assert torch.equal(_logits(draft), _logits(target))


def test_a_tied_head_is_counted_once(make_checkpoint: CheckpointMaker) -> None:
    model_dir = make_checkpoint("Qwen2ForCausalLM", tie_word_embeddings=True)
    target = _target(model_dir, batch_invariant=True)
    draft = _draft(model_dir, target, batch_invariant=True)
    assert draft.weights.lm_head is draft.weights.embed is target.weights.embed
    assert draft.bytes_shared_with_target == 2 * MATRIX_BYTES  # the embedding and the head's panels


def test_a_draft_of_other_projections_shares_the_matrices_but_packs_its_own_head(
    make_checkpoint: CheckpointMaker,
) -> None:
    model_dir = make_checkpoint("LlamaForCausalLM")
    target = _target(model_dir, batch_invariant=True)
    draft = _draft(model_dir, target, batch_invariant=False)
    assert draft.weights.embed is target.weights.embed and draft.weights.lm_head is target.weights.lm_head
    assert draft.head_projection is not target.head_projection
    assert draft.bytes_shared_with_target == 2 * MATRIX_BYTES


def test_a_draft_of_another_seed_shares_nothing(
    make_checkpoint: CheckpointMaker, make_model: Callable[..., Any], tmp_path: Path
) -> None:
    target = _target(make_checkpoint("LlamaForCausalLM"))
    model = make_model("LlamaForCausalLM")
    torch.manual_seed(1)
    type(model)(model.config).save_pretrained(tmp_path / "other-seed")
    draft = _draft(tmp_path / "other-seed", target)
    assert draft.weights.embed is not target.weights.embed and draft.weights.lm_head is not target.weights.lm_head
    assert draft.head_projection is not target.head_projection
    assert draft.bytes_shared_with_target == 0
    assert not torch.equal(_logits(draft), _logits(target))


def test_a_draft_without_embedding_and_head_takes_the_targets(make_checkpoint: CheckpointMaker) -> None:
    target = _target(make_checkpoint("LlamaForCausalLM"))
    draft = _draft(_without(make_checkpoint("LlamaForCausalLM"), EMBED, LM_HEAD), target)
    assert draft.weights.embed is target.weights.embed and draft.head_projection is target.head_projection
    assert torch.equal(_logits(draft), _logits(target))


def test_a_missing_embedding_the_target_cannot_stand_in_for_is_refused(make_checkpoint: CheckpointMaker) -> None:
    target = _target(make_checkpoint("LlamaForCausalLM"))
    narrow = _without(make_checkpoint("LlamaForCausalLM", hidden_size=32), EMBED)
    with pytest.raises(
        CheckpointError,
        match=r"lacks tensor 'model.embed_tokens.weight' \(expected shape \[96, 32\]\) "
        r"and the one in hand has shape \[96, 64\]",
    ):
        _draft(narrow, target)


def test_a_draft_over_another_vocabulary_is_refused_naming_both_sizes(make_checkpoint: CheckpointMaker) -> None:
    target = _target(make_checkpoint("LlamaForCausalLM"))
    with pytest.raises(UnsupportedConfigError, match="has vocab_size 80, the target 96"):
        _draft(make_checkpoint("LlamaForCausalLM", vocab_size=80), target)


@pytest.mark.parametrize(
    "architecture,overrides",
    [
        ("LlamaForCausalLM", {"attention_bias": True, "mlp_bias": True}),
        ("Qwen2ForCausalLM", {}),
        ("Qwen3ForCausalLM", {}),
    ],
)
def test_each_familys_draft_runs_its_checkpoint_as_the_target_does(
    architecture: str, overrides: dict[str, Any], make_checkpoint: CheckpointMaker
) -> None:
    """The loader's decisions show in the logits: Qwen2's q/k/v biases, Qwen3's q/k norms.

    Reverse-verified: with DraftDecoder delegating every hook but weight_layout (the loader then takes
    the default layout: no q/k/v biases, no q/k norms) the Qwen2 and Qwen3 cases fail."""
    model_dir = _with_random_vectors(make_checkpoint(architecture, **overrides))
    target = _target(model_dir)
    draft = _draft(model_dir, target)
    assert type(draft).__name__ == architecture.replace("ForCausalLM", "DraftForCausalLM")
    assert torch.equal(_logits(draft), _logits(target))
