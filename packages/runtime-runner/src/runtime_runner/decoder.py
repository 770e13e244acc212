"""The Llama-family decoder forward in plain torch over a paged KV cache.

Attention is handed in as a callable per layer (the runner writes the layer's new K/V into the
pool and runs its attention backend), so the decoder knows nothing about pages or backends. A
batch-invariant decoder (deterministic inference) runs its projections through InvariantLinear,
whose row i depends on input row i alone; the others through PackedLinear (oneDNN where it packs).
Every other op of the forward is per row already: the fused norms, rotary and SiLU-and-mul
(cpu_fused_ops) and the embedding gather.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch
import torch.nn.functional as F

from runtime_runner.arch_config import ArchConfig
from runtime_runner.batch_invariant_linear import InvariantLinear
from runtime_runner.checkpoint import CheckpointReader
from runtime_runner.decoder_weights import DecoderTraits, DecoderWeights, load_decoder_weights
from runtime_runner.mlp_activation import silu_and_mul
from runtime_runner.norm import add_rms_norm, rms_norm
from runtime_runner.packed_linear import PackedLinear
from runtime_runner.rope import RopeTable, apply_rope

# (layer index, q [T, H, D], k [T, KVH, D], v [T, KVH, D]) -> attention output [T, H, D]
LayerAttention = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
# rows [T, in] -> rows [T, out]: a PackedLinear or an InvariantLinear
Projection = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class LayerProjections:
    """One layer's four matmuls, ready to run."""

    qkv: Projection
    o: Projection
    gate_up: Projection
    down: Projection


class DecoderForCausalLM:
    """A decoder-only causal LM of the Llama family; subclasses set the architecture's traits."""

    architecture: ClassVar[str] = ""

    def __init__(self, cfg: ArchConfig, weights: DecoderWeights, rope: RopeTable, *, batch_invariant: bool) -> None:
        self.cfg = cfg
        self.weights = weights
        self.rope = rope
        self.batch_invariant = batch_invariant
        # Packed once here, for every forward (on CPU a second copy of each matrix, in the kernel's layout).
        linear: Callable[[torch.Tensor, torch.Tensor | None], Projection] = InvariantLinear.of if batch_invariant else PackedLinear.of
        self._projections = tuple(
            LayerProjections(linear(layer.qkv, layer.qkv_bias), linear(layer.o_proj, layer.o_bias),
                             linear(layer.gate_up, layer.gate_up_bias), linear(layer.down, layer.down_bias))
            for layer in weights.layers
        )
        self._lm_head = linear(weights.lm_head, None)

    @classmethod
    def traits_of(cls, cfg: ArchConfig) -> DecoderTraits:
        """The weight-level traits of this architecture under `cfg`."""
        return DecoderTraits(qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias, mlp_bias=cfg.mlp_bias, qk_norm=False)

    @classmethod
    def load(cls, model_dir: Path, cfg: ArchConfig, dtype: torch.dtype, device: torch.device, *,
             batch_invariant: bool) -> DecoderForCausalLM:
        """Load and fuse the checkpoint's weights and build the rotary tables; `batch_invariant`
        picks projections whose rows never depend on the batch (a CPU only)."""
        weights = load_decoder_weights(CheckpointReader(model_dir), cfg, cls.traits_of(cfg), dtype, device)
        rope = RopeTable.build(cfg.rope, cfg.head_dim, cfg.max_position_embeddings, dtype, device)
        return cls(cfg, weights, rope, batch_invariant=batch_invariant)

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
        """Softmax scale of the attention scores."""
        return float(self.cfg.head_dim**-0.5)

    def hidden_states(self, input_ids: torch.Tensor, positions: torch.Tensor, attention: LayerAttention) -> torch.Tensor:
        """Final-normed hidden states [tokens, hidden] of the new tokens."""
        cfg, w = self.cfg, self.weights
        tokens, heads, kv_heads, head_dim, eps = input_ids.shape[0], cfg.num_heads, cfg.num_kv_heads, cfg.head_dim, cfg.rms_norm_eps
        split = [heads * head_dim, kv_heads * head_dim, kv_heads * head_dim]
        qk_split = [heads, kv_heads]
        cos = self.rope.cos.index_select(0, positions)
        sin = self.rope.signed_sin.index_select(0, positions)
        h = F.embedding(input_ids, w.embed)
        x = rms_norm(h, w.layers[0].input_norm, eps)
        # Each residual add is fused into the norm that reads its sum: the next layer's input norm, or the final one.
        next_norms = [layer.input_norm for layer in w.layers[1:]] + [w.final_norm]
        for index, (layer, proj, next_norm) in enumerate(zip(w.layers, self._projections, next_norms, strict=True)):
            qkv = proj.qkv(x)
            if layer.q_norm is not None and layer.k_norm is not None:
                q, k, v = torch.split(qkv, split, dim=-1)
                q = apply_rope(rms_norm(q.view(tokens, heads, head_dim), layer.q_norm, eps), cos, sin)
                k = apply_rope(rms_norm(k.view(tokens, kv_heads, head_dim), layer.k_norm, eps), cos, sin)
            else:  # one rotation over q and k together: half the per-op overhead of a decode step's rope
                qk = apply_rope(qkv[:, : (heads + kv_heads) * head_dim].view(tokens, heads + kv_heads, head_dim), cos, sin)
                q, k = torch.split(qk, qk_split, dim=1)
                v = qkv[:, (heads + kv_heads) * head_dim :]
            out = attention(index, q, k, v.view(tokens, kv_heads, head_dim))
            h, x = add_rms_norm(h, proj.o(out.reshape(tokens, heads * head_dim)), layer.post_norm, eps)
            h, x = add_rms_norm(h, proj.down(silu_and_mul(proj.gate_up(x))), next_norm, eps)
        return x

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """fp32 logits [rows, vocab] of the given hidden rows."""
        return self._lm_head(hidden).float()


class LlamaForCausalLM(DecoderForCausalLM):
    """Llama: optional attention and MLP biases from the config."""

    architecture = "LlamaForCausalLM"


class Qwen2ForCausalLM(DecoderForCausalLM):
    """Qwen2: q/k/v projections always carry biases, the output projection never does."""

    architecture = "Qwen2ForCausalLM"

    @classmethod
    def traits_of(cls, cfg: ArchConfig) -> DecoderTraits:
        return DecoderTraits(qkv_bias=True, o_bias=False, mlp_bias=False, qk_norm=False)


class Qwen3ForCausalLM(DecoderForCausalLM):
    """Qwen3: per-head RMSNorm on q and k; attention biases as the config says."""

    architecture = "Qwen3ForCausalLM"

    @classmethod
    def traits_of(cls, cfg: ArchConfig) -> DecoderTraits:
        return DecoderTraits(qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias, mlp_bias=False, qk_norm=True)
