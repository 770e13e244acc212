"""What a hybrid checkpoint holds: every tensor name and shape of a Qwen3-Next or Qwen3.5 text model.

The two families differ only in how a Gated-DeltaNet layer stores its input projections:
Qwen3-Next fuses them (`in_proj_qkvz`, `in_proj_ba`, interleaved per key-head group), Qwen3.5
keeps four flat ones (`in_proj_qkv`, `in_proj_z`, `in_proj_b`, `in_proj_a`).
"""

from __future__ import annotations

from typing import Literal

from runtime_runner.loading.arch_config import ArchConfig
from runtime_runner.loading.checkpoint_layout import TensorSpec
from runtime_runner.loading.hybrid_config import HybridSpec
from runtime_runner.loading.tensor_names import EMBED, FINAL_NORM, LM_HEAD, layer_prefix

LinearProjections = Literal["grouped", "flat"]  # Qwen3-Next's fused per-group layout, Qwen3.5's four matrices


def hybrid_of(cfg: ArchConfig) -> HybridSpec:
    """The config's hybrid shape; a config without one is not a hybrid's."""
    if cfg.hybrid is None:
        raise TypeError(f"{cfg.architecture} is not a Gated-DeltaNet hybrid; its config has no layer kinds")
    return cfg.hybrid


def _linear_tensors(cfg: ArchConfig, prefix: str, projections: LinearProjections) -> list[TensorSpec]:
    shape, hidden = hybrid_of(cfg).linear, cfg.hidden_size
    if projections == "grouped":
        inputs = [
            TensorSpec(prefix + "in_proj_qkvz.weight", (2 * shape.keys + 2 * shape.values, hidden)),
            TensorSpec(prefix + "in_proj_ba.weight", (2 * shape.value_heads, hidden)),
        ]
    else:
        inputs = [
            TensorSpec(prefix + "in_proj_qkv.weight", (shape.conv_channels, hidden)),
            TensorSpec(prefix + "in_proj_z.weight", (shape.values, hidden)),
            TensorSpec(prefix + "in_proj_b.weight", (shape.value_heads, hidden)),
            TensorSpec(prefix + "in_proj_a.weight", (shape.value_heads, hidden)),
        ]
    return inputs + [
        TensorSpec(prefix + "conv1d.weight", (shape.conv_channels, 1, shape.conv_width)),
        TensorSpec(prefix + "A_log", (shape.value_heads,)),
        TensorSpec(prefix + "dt_bias", (shape.value_heads,)),
        TensorSpec(prefix + "norm.weight", (shape.value_dim,)),
        TensorSpec(prefix + "out_proj.weight", (hidden, shape.values)),
    ]


def _full_attention_tensors(cfg: ArchConfig, prefix: str) -> list[TensorSpec]:
    hidden, head_dim = cfg.hidden_size, cfg.head_dim
    q_out, kv_out = cfg.num_heads * head_dim, cfg.num_kv_heads * head_dim
    return [
        TensorSpec(prefix + "q_proj.weight", (2 * q_out, hidden)),  # each head's query, then its output gate
        TensorSpec(prefix + "k_proj.weight", (kv_out, hidden)),
        TensorSpec(prefix + "v_proj.weight", (kv_out, hidden)),
        TensorSpec(prefix + "q_norm.weight", (head_dim,)),
        TensorSpec(prefix + "k_norm.weight", (head_dim,)),
        TensorSpec(prefix + "o_proj.weight", (hidden, q_out)),
    ]


def _gated_mlp(prefix: str, inter: int, hidden: int) -> list[TensorSpec]:
    return [
        TensorSpec(prefix + "gate_proj.weight", (inter, hidden)),
        TensorSpec(prefix + "up_proj.weight", (inter, hidden)),
        TensorSpec(prefix + "down_proj.weight", (hidden, inter)),
    ]


def _mlp_tensors(cfg: ArchConfig, index: int, prefix: str) -> list[TensorSpec]:
    hybrid, hidden = hybrid_of(cfg), cfg.hidden_size
    if hybrid.moe is None or index not in hybrid.sparse_layers:
        return _gated_mlp(prefix, cfg.intermediate_size, hidden)
    moe = hybrid.moe
    specs = [TensorSpec(prefix + "gate.weight", (moe.experts, hidden))]
    for e in range(moe.experts):
        specs += _gated_mlp(f"{prefix}experts.{e}.", moe.expert_intermediate, hidden)
    if moe.shared_intermediate:
        specs += _gated_mlp(prefix + "shared_expert.", moe.shared_intermediate, hidden)
        specs.append(TensorSpec(prefix + "shared_expert_gate.weight", (1, hidden)))
    return specs


def hybrid_tensors(cfg: ArchConfig, projections: LinearProjections, tied_embeddings: bool) -> tuple[TensorSpec, ...]:
    """Every tensor a hybrid checkpoint of `cfg` holds, layer by layer, then the embedding, the
    final norm and (untied only) the LM head."""
    specs: list[TensorSpec] = []
    for i, kind in enumerate(hybrid_of(cfg).layer_kinds):
        p = layer_prefix(i)
        specs.append(TensorSpec(p + "input_layernorm.weight", (cfg.hidden_size,)))
        if kind == "linear_attention":
            specs += _linear_tensors(cfg, p + "linear_attn.", projections)
        else:
            specs += _full_attention_tensors(cfg, p + "self_attn.")
        specs.append(TensorSpec(p + "post_attention_layernorm.weight", (cfg.hidden_size,)))
        specs += _mlp_tensors(cfg, i, p + "mlp.")
    specs.append(TensorSpec(EMBED, (cfg.vocab_size, cfg.hidden_size)))
    specs.append(TensorSpec(FINAL_NORM, (cfg.hidden_size,)))
    if not tied_embeddings:
        specs.append(TensorSpec(LM_HEAD, (cfg.vocab_size, cfg.hidden_size)))
    return tuple(specs)
