"""The Gated-DeltaNet hybrid decoder (Qwen3-Next, Qwen3.5 text) in plain torch, and its entry classes.

Like the Llama-family decoder, it is handed its attention per layer: full-attention layers call
`attention` (the runner writes the layer's K/V into the pool and runs its attention backend),
linear-attention layers call `linear` (the runner runs its stamped linear-attention kernels over
the request's recurrent-state slot). The decoder computes everything else: the projections, the
decay and write strength of each token, the gated output norm, the gated full attention with its
partial rotary, and the dense or sparse MLPs. docs/hybrid-models-reference.md is the specification.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Self

import torch
import torch.nn.functional as F

from runtime_runner.loading.arch_config import ArchConfig
from runtime_runner.loading.checkpoint import CheckpointReader
from runtime_runner.loading.checkpoint_layout import TensorSpec, WeightLayout
from runtime_runner.loading.hybrid_layout import LinearProjections, hybrid_of, hybrid_tensors
from runtime_runner.loading.hybrid_weights import (
    DenseMlpWeights,
    GatedAttnWeights,
    HybridWeights,
    LinearAttnWeights,
    MoeWeights,
    load_hybrid_weights,
)
from runtime_runner.loading.loader_hooks import FusedProjections, decisions_of
from runtime_runner.models.hybrid.sparse_moe import DenseMlp, SparseMoe
from runtime_runner.models.layer_attention import LayerAttention, LinearLayerAttention
from runtime_runner.models.matrix_projection import LinearOf, Projection, group_projection, linear_of
from runtime_runner.models.norm import add_rms_norm, gated_rms_norm, rms_norm
from runtime_runner.models.rope import RopeTable, apply_rope
from runtime_runner.models.whole_vectors import in_whole_vectors


class _LinearMixer:
    """A Gated-DeltaNet layer's projections around its kernels."""

    def __init__(self, w: LinearAttnWeights, linear: LinearOf, cfg: ArchConfig, fused: bool) -> None:
        s = hybrid_of(cfg).linear
        self.w, self.shape = w, s
        self.widths = [s.conv_channels, s.values, s.value_heads, s.value_heads]  # [q k v | z | b | a]
        self.in_proj = group_projection(linear, w.in_proj, None, self.widths, fused)
        self.out_proj = linear(w.out_proj, None)

    def __call__(self, index: int, x: torch.Tensor, kernels: LinearLayerAttention, eps: float) -> torch.Tensor:
        s, w = self.shape, self.w
        mixed, z, b, a = torch.split(self.in_proj(x), self.widths, dim=-1)
        beta = in_whole_vectors(torch.sigmoid, b.float())
        g = w.neg_decay_rate * in_whole_vectors(F.softplus, a.float() + w.dt_bias)
        out = kernels(index, mixed.contiguous(), w.conv, g, beta)
        tokens = x.shape[0]
        normed = gated_rms_norm(out.to(x.dtype), z.reshape(tokens, s.value_heads, s.value_dim), w.norm, eps)
        return self.out_proj(normed.reshape(tokens, s.values))


class _GatedAttention:
    """A full-attention layer: q/k norms, partial rotary, and the sigmoid gate on its output."""

    def __init__(self, w: GatedAttnWeights, linear: LinearOf, cfg: ArchConfig, rotary_dim: int, fused: bool) -> None:
        q_out, kv_out = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
        self.w, self.cfg, self.rotary_dim = w, cfg, rotary_dim
        self.widths = [q_out, kv_out, kv_out, q_out]  # [q | k | v | gate]
        self.qkvg = group_projection(linear, w.qkvg, None, self.widths, fused)
        self.o_proj = linear(w.o_proj, None)

    def _rotated(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        rd = self.rotary_dim
        return torch.cat([apply_rope(x[..., :rd].contiguous(), cos, sin), x[..., rd:]], dim=-1)

    def __call__(
        self, index: int, x: torch.Tensor, attention: LayerAttention, cos: torch.Tensor, sin: torch.Tensor
    ) -> torch.Tensor:
        cfg, w = self.cfg, self.w
        tokens, heads, kv_heads, head_dim, eps = (
            x.shape[0],
            cfg.num_heads,
            cfg.num_kv_heads,
            cfg.head_dim,
            cfg.rms_norm_eps,
        )
        q, k, v, gate = torch.split(self.qkvg(x), self.widths, dim=-1)
        q = self._rotated(rms_norm(q.reshape(tokens, heads, head_dim), w.q_norm, eps), cos, sin)
        k = self._rotated(rms_norm(k.reshape(tokens, kv_heads, head_dim), w.k_norm, eps), cos, sin)
        out = attention(index, q, k, v.reshape(tokens, kv_heads, head_dim)).reshape(tokens, heads * head_dim)
        return self.o_proj(out * in_whole_vectors(torch.sigmoid, gate))


def _mlp_of(w: DenseMlpWeights | MoeWeights, linear: LinearOf, cfg: ArchConfig, fused: bool) -> DenseMlp | SparseMoe:
    def dense(gate_up: torch.Tensor, down: torch.Tensor) -> DenseMlp:
        inter = down.shape[1]
        return DenseMlp(group_projection(linear, gate_up, None, [inter, inter], fused), linear(down, None))

    if isinstance(w, MoeWeights):
        moe = hybrid_of(cfg).moe
        assert moe is not None  # a sparse layer's weights exist only under a MoE config
        shared = None if w.shared is None else dense(w.shared.gate_up, w.shared.down)
        return SparseMoe(
            moe,
            linear(w.router, None),
            tuple(dense(e.gate_up, e.down) for e in w.experts),
            shared,
            None if w.shared_gate is None else linear(w.shared_gate, None),
        )
    return dense(w.gate_up, w.down)


class HybridDecoder:
    """A hybrid causal LM: the forward over loaded weights. It answers no loader hook: its entry
    classes below (and the drafts, runtime_runner.models.hybrid.drafts) answer their own."""

    architecture: ClassVar[str] = ""
    linear_projections: ClassVar[LinearProjections] = "flat"

    def __init__(
        self,
        cfg: ArchConfig,
        weights: HybridWeights,
        rope: RopeTable,
        *,
        batch_invariant: bool,
        fused: FusedProjections,
        head_projection: Projection | None = None,
    ) -> None:
        """Pack every projection once; `head_projection`, when given, is an LM head already packed."""
        hybrid = hybrid_of(cfg)
        self.cfg, self.weights, self.rope, self.batch_invariant = cfg, weights, rope, batch_invariant
        linear: LinearOf = linear_of(batch_invariant, weights.embed.dtype)
        self._mixers: list[_LinearMixer | _GatedAttention] = []
        for layer in weights.layers:
            if isinstance(layer.mixer, LinearAttnWeights):
                self._mixers.append(_LinearMixer(layer.mixer, linear, cfg, fused.qkv))
            else:
                self._mixers.append(_GatedAttention(layer.mixer, linear, cfg, hybrid.rotary_dim, fused.qkv))
        self._mlps = [_mlp_of(layer.mlp, linear, cfg, fused.gate_up) for layer in weights.layers]
        # Each layer's index among the layers of its kind: a KV-pool layer, or a state-pool layer.
        self._kind_index = [
            hybrid.full_layers.index(i) if i in hybrid.full_layers else hybrid.linear_layers.index(i)
            for i in range(cfg.num_layers)
        ]
        self.head_projection: Projection = (
            head_projection if head_projection is not None else linear(weights.lm_head, None)
        )

    @property
    def dtype(self) -> torch.dtype:
        """The weights' element type."""
        return self.weights.embed.dtype

    @property
    def device(self) -> torch.device:
        """Where the weights live."""
        return self.weights.embed.device

    @property
    def attention_scale(self) -> float:
        """Softmax scale of the full-attention scores (over the whole head, not the rotary part)."""
        return float(self.cfg.head_dim**-0.5)

    def hidden_states(
        self, input_ids: torch.Tensor, positions: torch.Tensor, attention: LayerAttention, linear: LinearLayerAttention
    ) -> torch.Tensor:
        """Final-normed hidden states [tokens, hidden] of the new tokens."""
        w, eps = self.weights, self.cfg.rms_norm_eps
        cos = self.rope.cos.index_select(0, positions)
        sin = self.rope.signed_sin.index_select(0, positions)
        h = F.embedding(input_ids, w.embed)
        x = rms_norm(h, w.layers[0].input_norm, eps)
        next_norms = [layer.input_norm for layer in w.layers[1:]] + [w.final_norm]
        for layer, mixer, mlp, index, next_norm in zip(
            w.layers, self._mixers, self._mlps, self._kind_index, next_norms, strict=True
        ):
            if isinstance(mixer, _LinearMixer):
                mixed = mixer(index, x, linear, eps)
            else:
                mixed = mixer(index, x, attention, cos, sin)
            h, x = add_rms_norm(h, mixed, layer.post_norm, eps)
            h, x = add_rms_norm(h, mlp(x), next_norm, eps)
        return x

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """fp32 logits [rows, vocab] of the given hidden rows."""
        return self.head_projection(hidden).float()

    @classmethod
    def load(
        cls, model_dir: Path, cfg: ArchConfig, dtype: torch.dtype, device: torch.device, *, batch_invariant: bool
    ) -> Self:
        """Load the checkpoint's weights as this class's loader decisions say, pack them and build
        the partial rotary tables."""
        decisions = decisions_of(cls, cfg)
        weights = load_hybrid_weights(
            CheckpointReader(model_dir), cfg, decisions, cls.linear_projections, dtype, device
        )
        rope = RopeTable.build(cfg.rope, hybrid_of(cfg).rotary_dim, cfg.max_position_embeddings, dtype, device)
        return cls(cfg, weights, rope, batch_invariant=batch_invariant, fused=decisions.fused_projections)


class HybridLoaderHooks:
    """The hybrid families' answers to every loader hook, from the class's `linear_projections`:
    no biases, q/k norms, every projection group fused, the config's tying, the family's tensors."""

    linear_projections: ClassVar[LinearProjections]

    @classmethod
    def weight_layout(cls, cfg: ArchConfig) -> WeightLayout:
        """No biases anywhere; q/k norms on every full-attention layer."""
        return WeightLayout(qkv_bias=False, o_bias=False, mlp_bias=False, qk_norm=True)

    @classmethod
    def fused_projections(cls, cfg: ArchConfig) -> FusedProjections:
        """Each layer's input projections one matmul ([q|k|v|z|b|a] or [q|k|v|gate]), and gate/up one."""
        return FusedProjections(qkv=True, gate_up=True)

    @classmethod
    def tied_embeddings(cls, cfg: ArchConfig) -> bool:
        """As the config says."""
        return cfg.tie_word_embeddings

    @classmethod
    def expected_tensors(cls, cfg: ArchConfig) -> tuple[TensorSpec, ...]:
        """Every tensor of the family's layout, the LM head unless tied."""
        return hybrid_tensors(cfg, cls.linear_projections, cfg.tie_word_embeddings)


class Qwen3NextForCausalLM(HybridLoaderHooks, HybridDecoder):
    """Qwen3-Next: grouped Gated-DeltaNet input projections; sparse MoE layers where the config says."""

    architecture = "Qwen3NextForCausalLM"
    linear_projections = "grouped"


class Qwen3_5ForCausalLM(HybridLoaderHooks, HybridDecoder):
    """Qwen3.5 text: flat Gated-DeltaNet input projections; dense MLPs."""

    architecture = "Qwen3_5ForCausalLM"
    linear_projections = "flat"
