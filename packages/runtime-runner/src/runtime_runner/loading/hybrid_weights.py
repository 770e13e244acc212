"""A hybrid checkpoint's weights, read and laid out once for the forward.

Both families end up in one layout, so the forward has no family branches:
- a Gated-DeltaNet layer's input projections become one matrix whose rows give, flat and head-major,
  [q | k | v | z | b | a] (Qwen3-Next's per-key-head-group interleaving undone, Qwen3.5's four
  matrices stacked); the first three parts are the causal conv's channels, in conv1d.weight's order;
- a full-attention layer's projections become one [q | k | v | gate] matrix (q_proj's per-head
  query/gate interleaving undone);
- every (1 + w) RMSNorm weight is stored as 1 + w, so the plain `rms_norm` computes it, and the
  decay's -exp(A_log) is computed once in fp32.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runtime_runner.errors import CheckpointError
from runtime_runner.loading.arch_config import ArchConfig
from runtime_runner.loading.checkpoint import CheckpointReader
from runtime_runner.loading.hybrid_config import HybridSpec
from runtime_runner.loading.hybrid_layout import LinearProjections, hybrid_of
from runtime_runner.loading.loader_hooks import LoaderDecisions
from runtime_runner.loading.tensor_names import EMBED, FINAL_NORM, LM_HEAD, layer_prefix


@dataclass(frozen=True)
class LinearAttnWeights:
    """One Gated-DeltaNet layer."""

    in_proj: torch.Tensor  # [2*keys + 2*values + 2*value_heads, hidden]: [q | k | v | z | b | a]
    conv: torch.Tensor  # [conv channels, conv width]
    neg_decay_rate: torch.Tensor  # -exp(A_log), fp32 [value_heads]
    dt_bias: torch.Tensor  # fp32 [value_heads]
    norm: torch.Tensor  # the gated RMSNorm's weight (plain w) [value_dim]
    out_proj: torch.Tensor  # [hidden, values]


@dataclass(frozen=True)
class GatedAttnWeights:
    """One gated full-attention layer."""

    qkvg: torch.Tensor  # [q | k | v | gate] rows
    q_norm: torch.Tensor  # 1 + w
    k_norm: torch.Tensor  # 1 + w
    o_proj: torch.Tensor


@dataclass(frozen=True)
class DenseMlpWeights:
    """A gated MLP: [gate | up] rows and the down projection."""

    gate_up: torch.Tensor
    down: torch.Tensor


@dataclass(frozen=True)
class MoeWeights:
    """A sparse MLP: the router, each expert's gated MLP, and the gated shared expert (if any)."""

    router: torch.Tensor  # [experts, hidden]
    experts: tuple[DenseMlpWeights, ...]
    shared: DenseMlpWeights | None
    shared_gate: torch.Tensor | None  # [1, hidden]


@dataclass(frozen=True)
class HybridLayerWeights:
    """One decoder layer: its two norms (1 + w), its mixer and its MLP."""

    input_norm: torch.Tensor
    mixer: LinearAttnWeights | GatedAttnWeights
    post_norm: torch.Tensor
    mlp: DenseMlpWeights | MoeWeights


@dataclass(frozen=True)
class HybridWeights:
    """The whole hybrid decoder."""

    embed: torch.Tensor
    layers: tuple[HybridLayerWeights, ...]
    final_norm: torch.Tensor  # 1 + w
    lm_head: torch.Tensor


class _Reader:
    """Reads tensors at the shapes the entry class expects, as the model dtype."""

    def __init__(
        self, reader: CheckpointReader, decisions: LoaderDecisions, dtype: torch.dtype, device: torch.device
    ) -> None:
        self.reader, self.dtype, self.device = reader, dtype, device
        self.shapes = {spec.name: spec.shape for spec in decisions.expected_tensors}

    def __call__(self, name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
        return self.reader.read(name, self.shapes[name], dtype or self.dtype, self.device)

    def one_plus(self, name: str) -> torch.Tensor:
        return (1.0 + self(name, torch.float32)).to(self.dtype)


def _grouped_in_proj(read: _Reader, prefix: str, hybrid: HybridSpec) -> torch.Tensor:
    """Qwen3-Next's in_proj_qkvz / in_proj_ba, whose rows run key-head group by group
    ([q_g | k_g | v_g | z_g] and [b_g | a_g]), regrouped into flat [q | k | v | z | b | a]."""
    s = hybrid.linear
    ratio = s.value_heads // s.key_heads
    qkvz = read(prefix + "in_proj_qkvz.weight").view(s.key_heads, 2 * s.key_dim + 2 * ratio * s.value_dim, -1)
    q, k, v, z = torch.split(qkvz, [s.key_dim, s.key_dim, ratio * s.value_dim, ratio * s.value_dim], dim=1)
    b, a = torch.split(read(prefix + "in_proj_ba.weight").view(s.key_heads, 2 * ratio, -1), [ratio, ratio], dim=1)
    return torch.cat([part.reshape(-1, part.shape[-1]) for part in (q, k, v, z, b, a)])


def _flat_in_proj(read: _Reader, prefix: str) -> torch.Tensor:
    return torch.cat(
        [
            read(prefix + name)
            for name in ("in_proj_qkv.weight", "in_proj_z.weight", "in_proj_b.weight", "in_proj_a.weight")
        ]
    )


def _linear_attn(read: _Reader, prefix: str, hybrid: HybridSpec, projections: LinearProjections) -> LinearAttnWeights:
    in_proj = _grouped_in_proj(read, prefix, hybrid) if projections == "grouped" else _flat_in_proj(read, prefix)
    return LinearAttnWeights(
        in_proj=in_proj,
        conv=read(prefix + "conv1d.weight").squeeze(1).contiguous(),
        neg_decay_rate=-torch.exp(read(prefix + "A_log", torch.float32)),
        dt_bias=read(prefix + "dt_bias", torch.float32),
        norm=read(prefix + "norm.weight"),
        out_proj=read(prefix + "out_proj.weight"),
    )


def _gated_attn(read: _Reader, prefix: str, cfg: ArchConfig) -> GatedAttnWeights:
    query_gate = read(prefix + "q_proj.weight").view(cfg.num_heads, 2, cfg.head_dim, -1)
    query, gate = query_gate[:, 0].reshape(-1, cfg.hidden_size), query_gate[:, 1].reshape(-1, cfg.hidden_size)
    qkvg = torch.cat([query, read(prefix + "k_proj.weight"), read(prefix + "v_proj.weight"), gate])
    return GatedAttnWeights(
        qkvg=qkvg,
        q_norm=read.one_plus(prefix + "q_norm.weight"),
        k_norm=read.one_plus(prefix + "k_norm.weight"),
        o_proj=read(prefix + "o_proj.weight"),
    )


def _dense(read: _Reader, prefix: str) -> DenseMlpWeights:
    return DenseMlpWeights(
        gate_up=torch.cat([read(prefix + "gate_proj.weight"), read(prefix + "up_proj.weight")]),
        down=read(prefix + "down_proj.weight"),
    )


def _mlp(read: _Reader, prefix: str, hybrid: HybridSpec, index: int) -> DenseMlpWeights | MoeWeights:
    moe = hybrid.moe
    if moe is None or index not in hybrid.sparse_layers:
        return _dense(read, prefix)
    shared = _dense(read, prefix + "shared_expert.") if moe.shared_intermediate else None
    return MoeWeights(
        router=read(prefix + "gate.weight"),
        experts=tuple(_dense(read, f"{prefix}experts.{e}.") for e in range(moe.experts)),
        shared=shared,
        shared_gate=read(prefix + "shared_expert_gate.weight") if shared is not None else None,
    )


def load_hybrid_weights(
    reader: CheckpointReader,
    cfg: ArchConfig,
    decisions: LoaderDecisions,
    projections: LinearProjections,
    dtype: torch.dtype,
    device: torch.device,
) -> HybridWeights:
    """Check that the checkpoint holds every tensor of `decisions.expected_tensors` (one
    CheckpointError names each it lacks), then read and lay them out as this module says."""
    missing = [spec for spec in decisions.expected_tensors if not reader.has(spec.name)]
    if missing:
        listed = ", ".join(f"tensor {spec.name!r} (expected shape {list(spec.shape)})" for spec in missing)
        raise CheckpointError(
            f"checkpoint {reader.model_dir} lacks {listed}; accepted: a checkpoint holding every tensor "
            f"its entry class expects ({len(decisions.expected_tensors)} here)"
        )
    hybrid, read = hybrid_of(cfg), _Reader(reader, decisions, dtype, device)
    layers = []
    for i, kind in enumerate(hybrid.layer_kinds):
        p = layer_prefix(i)
        mixer = (
            _linear_attn(read, p + "linear_attn.", hybrid, projections)
            if kind == "linear_attention"
            else _gated_attn(read, p + "self_attn.", cfg)
        )
        layers.append(
            HybridLayerWeights(
                input_norm=read.one_plus(p + "input_layernorm.weight"),
                mixer=mixer,
                post_norm=read.one_plus(p + "post_attention_layernorm.weight"),
                mlp=_mlp(read, p + "mlp.", hybrid, i),
            )
        )
    embed = read(EMBED)
    return HybridWeights(
        embed=embed,
        layers=tuple(layers),
        final_norm=read.one_plus(FINAL_NORM),
        lm_head=embed if decisions.tied_embeddings else read(LM_HEAD),
    )
