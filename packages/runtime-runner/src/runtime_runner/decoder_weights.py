"""A Llama-family decoder's weights, fused at load: one QKV and one gate/up matrix per layer.

Fusing turns six projections per layer into three matmuls, which is what a batch-1 decode on a
CPU pays for (per-op overhead), not the flops.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runtime_runner.arch_config import ArchConfig
from runtime_runner.checkpoint import CheckpointReader


@dataclass(frozen=True)
class DecoderTraits:
    """What distinguishes one Llama-family architecture from another at the weight level."""

    qkv_bias: bool  # q/k/v projections carry biases
    o_bias: bool
    mlp_bias: bool
    qk_norm: bool  # per-head RMSNorm on q and k before rotary (Qwen3)


@dataclass(frozen=True)
class LayerWeights:
    """One decoder layer."""

    input_norm: torch.Tensor
    qkv: torch.Tensor
    qkv_bias: torch.Tensor | None
    q_norm: torch.Tensor | None
    k_norm: torch.Tensor | None
    o_proj: torch.Tensor
    o_bias: torch.Tensor | None
    post_norm: torch.Tensor
    gate_up: torch.Tensor
    gate_up_bias: torch.Tensor | None
    down: torch.Tensor
    down_bias: torch.Tensor | None


@dataclass(frozen=True)
class DecoderWeights:
    """The whole decoder: embeddings, layers, final norm, LM head (the embeddings when tied)."""

    embed: torch.Tensor
    layers: tuple[LayerWeights, ...]
    final_norm: torch.Tensor
    lm_head: torch.Tensor


def load_decoder_weights(
    reader: CheckpointReader, cfg: ArchConfig, traits: DecoderTraits, dtype: torch.dtype, device: torch.device
) -> DecoderWeights:
    """Read, check and fuse every tensor the decoder needs."""

    def read(name: str, *shape: int) -> torch.Tensor:
        return reader.read(name, shape, dtype, device)

    hidden, head_dim = cfg.hidden_size, cfg.head_dim
    q_out, kv_out, inter = cfg.num_heads * head_dim, cfg.num_kv_heads * head_dim, cfg.intermediate_size
    layers = []
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        attn, mlp = p + "self_attn.", p + "mlp."
        qkv = torch.cat([read(attn + "q_proj.weight", q_out, hidden), read(attn + "k_proj.weight", kv_out, hidden),
                         read(attn + "v_proj.weight", kv_out, hidden)])
        qkv_bias = None
        if traits.qkv_bias:
            qkv_bias = torch.cat([read(attn + "q_proj.bias", q_out), read(attn + "k_proj.bias", kv_out), read(attn + "v_proj.bias", kv_out)])
        gate_up = torch.cat([read(mlp + "gate_proj.weight", inter, hidden), read(mlp + "up_proj.weight", inter, hidden)])
        layers.append(
            LayerWeights(
                input_norm=read(p + "input_layernorm.weight", hidden),
                qkv=qkv,
                qkv_bias=qkv_bias,
                q_norm=read(attn + "q_norm.weight", head_dim) if traits.qk_norm else None,
                k_norm=read(attn + "k_norm.weight", head_dim) if traits.qk_norm else None,
                o_proj=read(attn + "o_proj.weight", hidden, q_out),
                o_bias=read(attn + "o_proj.bias", hidden) if traits.o_bias else None,
                post_norm=read(p + "post_attention_layernorm.weight", hidden),
                gate_up=gate_up,
                gate_up_bias=torch.cat([read(mlp + "gate_proj.bias", inter), read(mlp + "up_proj.bias", inter)]) if traits.mlp_bias else None,
                down=read(mlp + "down_proj.weight", hidden, inter),
                down_bias=read(mlp + "down_proj.bias", hidden) if traits.mlp_bias else None,
            )
        )
    embed = read("model.embed_tokens.weight", cfg.vocab_size, hidden)
    lm_head = embed if cfg.tie_word_embeddings else read("lm_head.weight", cfg.vocab_size, hidden)
    return DecoderWeights(embed=embed, layers=tuple(layers), final_norm=read("model.norm.weight", hidden), lm_head=lm_head)
