"""The decoder forward, with plain causal attention over one sequence, equals transformers' logits
for each architecture and rope variant (fp32, random tiny weights)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from runtime_runner.loading.arch_config import read_arch_config
from runtime_runner.models.architectures import model_class_for

ROPE_VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "linear": {"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}},
    "llama3": {
        "rope_parameters": {
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
            "rope_theta": 500000.0,
        }
    },
    "yarn": {
        "rope_parameters": {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 64,
            "rope_theta": 10000.0,
        }
    },
}


def _dense_causal(layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    out = F.scaled_dot_product_attention(
        q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True, enable_gqa=True
    )
    return out.transpose(0, 1)


def _our_logits(model_dir: Path, ids: torch.Tensor) -> torch.Tensor:
    cfg = read_arch_config(model_dir)
    model = model_class_for(cfg.architecture).load(
        model_dir, cfg, torch.float32, torch.device("cpu"), batch_invariant=False
    )
    with torch.inference_mode():
        return model.logits(model.hidden_states(ids, torch.arange(ids.shape[0]), _dense_causal))


@pytest.mark.parametrize(
    "architecture,overrides",
    [
        ("LlamaForCausalLM", {"attention_bias": True, "mlp_bias": True}),
        ("Qwen2ForCausalLM", {"tie_word_embeddings": True}),
        ("Qwen3ForCausalLM", {}),
    ],
)
def test_logits_match_transformers(
    architecture: str, overrides: dict[str, Any], make_checkpoint: Callable[..., Path], make_model: Callable[..., Any]
) -> None:
    model_dir = make_checkpoint(architecture, **overrides)
    ids = torch.randint(0, 96, (40,), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        expected = make_model(architecture, **overrides)(ids[None]).logits[0]
    torch.testing.assert_close(_our_logits(model_dir, ids), expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("variant", sorted(ROPE_VARIANTS))
def test_rope_variants_match_transformers(
    variant: str, make_checkpoint: Callable[..., Path], make_model: Callable[..., Any]
) -> None:
    """Positions past original_max_position_embeddings exercise the scaled frequencies.

    Reverse-verified: dropping the llama3 smoothing (returning the plain scaled inv_freq) fails the llama3 case."""
    overrides = ROPE_VARIANTS[variant]
    model_dir = make_checkpoint("LlamaForCausalLM", **overrides)
    ids = torch.randint(0, 96, (150,), generator=torch.Generator().manual_seed(2))
    with torch.inference_mode():
        expected = make_model("LlamaForCausalLM", **overrides)(ids[None]).logits[0]
    torch.testing.assert_close(_our_logits(model_dir, ids), expected, atol=1e-4, rtol=1e-4)
