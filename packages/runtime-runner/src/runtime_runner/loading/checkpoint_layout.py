"""What a Llama-family checkpoint holds: the per-layer weight layout and every tensor name and shape under it."""

from __future__ import annotations

from dataclasses import dataclass

from runtime_runner.loading.arch_config import ArchConfig
from runtime_runner.loading.tensor_names import EMBED, FINAL_NORM, LM_HEAD, layer_prefix


@dataclass(frozen=True)
class WeightLayout:
    """The per-layer tensors that distinguish one Llama-family architecture from another."""

    qkv_bias: bool  # q/k/v projections carry biases
    o_bias: bool
    mlp_bias: bool
    qk_norm: bool  # per-head RMSNorm on q and k before rotary (Qwen3)


@dataclass(frozen=True)
class TensorSpec:
    """One tensor a checkpoint must hold, with the shape the config implies."""

    name: str
    shape: tuple[int, ...]


def layout_tensors(cfg: ArchConfig, layout: WeightLayout, tied_embeddings: bool) -> tuple[TensorSpec, ...]:
    """Every tensor a checkpoint of `cfg` holds under `layout`, layer by layer, then the embedding,
    the final norm and (untied only) the LM head."""
    hidden, head_dim, inter = cfg.hidden_size, cfg.head_dim, cfg.intermediate_size
    q_out, kv_out = cfg.num_heads * head_dim, cfg.num_kv_heads * head_dim
    specs: list[TensorSpec] = []
    for i in range(cfg.num_layers):
        attn, mlp = layer_prefix(i) + "self_attn.", layer_prefix(i) + "mlp."
        per_layer: list[tuple[str, tuple[int, ...], bool]] = [
            (layer_prefix(i) + "input_layernorm.weight", (hidden,), True),
            (attn + "q_proj.weight", (q_out, hidden), True),
            (attn + "k_proj.weight", (kv_out, hidden), True),
            (attn + "v_proj.weight", (kv_out, hidden), True),
            (attn + "q_proj.bias", (q_out,), layout.qkv_bias),
            (attn + "k_proj.bias", (kv_out,), layout.qkv_bias),
            (attn + "v_proj.bias", (kv_out,), layout.qkv_bias),
            (attn + "q_norm.weight", (head_dim,), layout.qk_norm),
            (attn + "k_norm.weight", (head_dim,), layout.qk_norm),
            (attn + "o_proj.weight", (hidden, q_out), True),
            (attn + "o_proj.bias", (hidden,), layout.o_bias),
            (layer_prefix(i) + "post_attention_layernorm.weight", (hidden,), True),
            (mlp + "gate_proj.weight", (inter, hidden), True),
            (mlp + "up_proj.weight", (inter, hidden), True),
            (mlp + "down_proj.weight", (hidden, inter), True),
            (mlp + "gate_proj.bias", (inter,), layout.mlp_bias),
            (mlp + "up_proj.bias", (inter,), layout.mlp_bias),
            (mlp + "down_proj.bias", (hidden,), layout.mlp_bias),
        ]
        specs.extend(TensorSpec(name, shape) for name, shape, held in per_layer if held)
    specs.append(TensorSpec(EMBED, (cfg.vocab_size, hidden)))
    specs.append(TensorSpec(FINAL_NORM, (hidden,)))
    if not tied_embeddings:
        specs.append(TensorSpec(LM_HEAD, (cfg.vocab_size, hidden)))
    return tuple(specs)
