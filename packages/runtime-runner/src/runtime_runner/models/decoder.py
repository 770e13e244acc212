"""The Llama-family decoder forward in plain torch over a paged KV cache.

Attention is handed in as a callable per layer (the runner writes the layer's new K/V into the
pool and runs its attention backend), so the decoder knows nothing about pages or backends. A
batch-invariant decoder (deterministic inference) runs its projections through InvariantLinear,
whose row i depends on input row i alone; the others through PackedLinear (oneDNN where it packs).
A quantized matrix (a GGUF file's, or int8) runs the quantized kernel in either mode
(runtime_runner.models.matrix_projection), and its packed copy is the only one the decoder keeps.
Every other op of the forward is per row already: the fused norms, rotary and SiLU-and-mul
(cpu_fused_ops) and the embedding gather.

The forward is shared by every entry class; what differs between them is how the loader lays their
weights out, which it asks each class through named hooks (runtime_runner.loading.loader_hooks). The target
families are here; the drafts, which answer the same hooks, are in runtime_runner.models.drafts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Self

import torch

from config_bags.server.bags.model import Quantization
from native_build import CpuTier
from runtime_runner.kernels.quantized_linear import QuantizedActivations
from runtime_runner.loading.arch_config import ArchConfig
from runtime_runner.loading.checkpoint_layout import TensorSpec, WeightLayout, layout_tensors
from runtime_runner.loading.checkpoint_source import weight_reader_at
from runtime_runner.loading.decoder_weights import DecoderWeights, load_decoder_weights
from runtime_runner.loading.int8_weights import Int8Weights
from runtime_runner.loading.loader_hooks import FusedProjections, decisions_of
from runtime_runner.loading.weight_matrix import loaded
from runtime_runner.models.layer_attention import LayerAttention
from runtime_runner.models.matrix_projection import Projection, embedding_of, group_projection, linear_of
from runtime_runner.models.mlp_activation import silu_and_mul
from runtime_runner.models.norm import add_rms_norm, rms_norm
from runtime_runner.models.rope import RopeTable, apply_rope

if TYPE_CHECKING:
    from runtime_runner.parallel.tensor_parallel import TensorParallel


@dataclass(frozen=True)
class LayerProjections:
    """One layer's four matmuls, ready to run."""

    qkv: Projection
    o: Projection
    gate_up: Projection
    down: Projection


class DecoderForCausalLM:
    """A decoder-only causal LM of the Llama family: the forward over loaded weights.

    It answers no loader hook (runtime_runner.loading.loader_hooks): the entry classes below it do."""

    architecture: ClassVar[str] = ""

    def __init__(
        self,
        cfg: ArchConfig,
        weights: DecoderWeights,
        rope: RopeTable,
        *,
        batch_invariant: bool,
        fused: FusedProjections,
        head_projection: Projection | None = None,
        tensor_parallel: TensorParallel | None = None,
        quantized_activations: QuantizedActivations = "float32",
        cpu_tier: CpuTier | None = None,
    ) -> None:
        """Pack every projection once; `head_projection`, when given, is an LM head already packed
        over `weights.lm_head` (a draft's target's), used instead of packing another. With
        `tensor_parallel`, `cfg` and `weights` are one rank's (runtime_runner.parallel.tensor_parallel):
        o and down sum their partial products across the ranks, the embedding and LM head
        cover the whole vocabulary. `quantized_activations` is how quantized matrices read their rows,
        on the kernels built for `cpu_tier` (QuantizedLinear.of; None: this CPU's highest tier)."""
        self.cfg = cfg
        self.rope = rope
        self.batch_invariant = batch_invariant
        # Packed once here, for every forward (a dense matrix on CPU: a second copy, in the kernel's layout).
        linear = linear_of(batch_invariant, weights.final_norm.dtype, quantized_activations, cpu_tier)
        row_linear = linear if tensor_parallel is None else tensor_parallel.row_parallel(linear)
        q_out, kv_out = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
        qkv_rows, gate_up_rows = (q_out, kv_out, kv_out), (cfg.intermediate_size, cfg.intermediate_size)
        self._projections = tuple(
            LayerProjections(
                group_projection(linear, loaded(layer.qkv), layer.qkv_bias, qkv_rows, fused.qkv),
                row_linear(loaded(layer.o_proj), layer.o_bias),
                group_projection(linear, loaded(layer.gate_up), layer.gate_up_bias, gate_up_rows, fused.gate_up),
                row_linear(loaded(layer.down), layer.down_bias),
            )
            for layer in weights.layers
        )
        own_head = head_projection is None
        self.head_projection: Projection = (
            linear(loaded(weights.lm_head), None) if head_projection is None else head_projection
        )
        tied_head = self.head_projection if own_head and weights.lm_head is weights.embed else None
        self._embedding = embedding_of(loaded(weights.embed), tied_head, weights.final_norm.dtype)
        if tensor_parallel is not None:
            self.head_projection = tensor_parallel.head(self.head_projection, cfg.vocab_size)
            self._embedding = tensor_parallel.embedding(self._embedding)
        self.weights = weights.released()

    @property
    def dtype(self) -> torch.dtype:
        """The activations' element type (the dense weights', the norms' always among them)."""
        return self.weights.final_norm.dtype

    @property
    def device(self) -> torch.device:
        """Where the weights live."""
        return self.weights.final_norm.device

    @property
    def attention_scale(self) -> float:
        """Softmax scale of the attention scores."""
        return float(self.cfg.head_dim**-0.5)

    def embeddings(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The embedding rows [tokens, hidden] of the tokens."""
        return self._embedding(input_ids)

    def rope_rows(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, signed sin) [tokens, head_dim] of each token's position."""
        return self.rope.cos.index_select(0, positions), self.rope.signed_sin.index_select(0, positions)

    @property
    def projections(self) -> tuple[LayerProjections, ...]:
        """Each layer's projections, packed."""
        return self._projections

    def hidden_states(
        self, input_ids: torch.Tensor, positions: torch.Tensor, attention: LayerAttention
    ) -> torch.Tensor:
        """Final-normed hidden states [tokens, hidden] of the new tokens."""
        cfg, w = self.cfg, self.weights
        tokens, heads, kv_heads, head_dim, eps = (
            input_ids.shape[0],
            cfg.num_heads,
            cfg.num_kv_heads,
            cfg.head_dim,
            cfg.rms_norm_eps,
        )
        split = [heads * head_dim, kv_heads * head_dim, kv_heads * head_dim]
        qk_split = [heads, kv_heads]
        cos, sin = self.rope_rows(positions)
        h = self.embeddings(input_ids)
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
                qk = apply_rope(
                    qkv[:, : (heads + kv_heads) * head_dim].view(tokens, heads + kv_heads, head_dim), cos, sin
                )
                q, k = torch.split(qk, qk_split, dim=1)
                v = qkv[:, (heads + kv_heads) * head_dim :]
            out = attention(index, q, k, v.view(tokens, kv_heads, head_dim))
            h, x = add_rms_norm(h, proj.o(out.reshape(tokens, heads * head_dim)), layer.post_norm, eps)
            h, x = add_rms_norm(h, proj.down(silu_and_mul(proj.gate_up(x))), next_norm, eps)
        return x

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """fp32 logits [rows, vocab] of the given hidden rows."""
        return self.head_projection(hidden).float()


class TargetDecoder(DecoderForCausalLM):
    """An entry class loaded on its own: the model a runner serves, and the target a draft shares
    with. It answers no loader hook itself: each family below it answers its own."""

    @classmethod
    def load(
        cls,
        model_dir: Path,
        cfg: ArchConfig,
        dtype: torch.dtype,
        device: torch.device,
        *,
        batch_invariant: bool,
        quantization: Quantization | None = None,
        tensor_parallel: TensorParallel | None = None,
        quantized_activations: QuantizedActivations = "float32",
        cpu_tier: CpuTier | None = None,
    ) -> Self:
        """Load the checkpoint's weights (a Hugging Face directory, or a GGUF file whose quantized
        matrices stay so) as this class's loader decisions say, pack them and build the rotary
        tables; `batch_invariant` picks projections whose rows never depend on the batch (a CPU
        only); `quantization` (model.quantization) quantizes a dense checkpoint's matrices at load;
        with `tensor_parallel`, the decoder keeps this rank's slices and shape; a GGUF file's quantized
        matrices read their rows as `quantized_activations` (exec.kernel.quantized_activations) on the
        kernels built for `cpu_tier` (exec.kernel.cpu_isa)."""
        decisions = decisions_of(cls, cfg)
        reader = weight_reader_at(model_dir)
        if quantization == "int8":
            reader = Int8Weights(reader)
        weights = load_decoder_weights(reader, cfg, decisions, dtype, device)
        if tensor_parallel is not None:
            weights, cfg = tensor_parallel.weights(weights), tensor_parallel.layout.arch(cfg)
        rope = RopeTable.build(cfg.rope, cfg.head_dim, cfg.max_position_embeddings, dtype, device)
        return cls(
            cfg,
            weights,
            rope,
            batch_invariant=batch_invariant,
            fused=decisions.fused_projections,
            tensor_parallel=tensor_parallel,
            quantized_activations=quantized_activations,
            cpu_tier=cpu_tier,
        )


ALL_FUSED = FusedProjections(qkv=True, gate_up=True)


class LlamaForCausalLM(TargetDecoder):
    """Llama: optional attention and MLP biases from the config; it answers every loader hook."""

    architecture = "LlamaForCausalLM"

    @classmethod
    def weight_layout(cls, cfg: ArchConfig) -> WeightLayout:
        """The config's attention and MLP biases, no q/k norms."""
        return WeightLayout(
            qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias, mlp_bias=cfg.mlp_bias, qk_norm=False
        )

    @classmethod
    def fused_projections(cls, cfg: ArchConfig) -> FusedProjections:
        """QKV and gate/up each one matmul."""
        return ALL_FUSED

    @classmethod
    def tied_embeddings(cls, cfg: ArchConfig) -> bool:
        """As the config says."""
        return cfg.tie_word_embeddings

    @classmethod
    def expected_tensors(cls, cfg: ArchConfig) -> tuple[TensorSpec, ...]:
        """Every tensor of its layout, the LM head unless tied."""
        return layout_tensors(cfg, cls.weight_layout(cfg), cls.tied_embeddings(cfg))


class Qwen2ForCausalLM(TargetDecoder):
    """Qwen2: q/k/v projections always carry biases, the output projection never does."""

    architecture = "Qwen2ForCausalLM"

    @classmethod
    def weight_layout(cls, cfg: ArchConfig) -> WeightLayout:
        """q/k/v biases whatever the config says, no other bias, no q/k norms."""
        return WeightLayout(qkv_bias=True, o_bias=False, mlp_bias=False, qk_norm=False)

    @classmethod
    def fused_projections(cls, cfg: ArchConfig) -> FusedProjections:
        """QKV and gate/up each one matmul."""
        return ALL_FUSED


class Qwen3ForCausalLM(TargetDecoder):
    """Qwen3: per-head RMSNorm on q and k; attention biases as the config says."""

    architecture = "Qwen3ForCausalLM"

    @classmethod
    def weight_layout(cls, cfg: ArchConfig) -> WeightLayout:
        """q/k norms; attention biases from the config, no MLP bias."""
        return WeightLayout(qkv_bias=cfg.attention_bias, o_bias=cfg.attention_bias, mlp_bias=False, qk_norm=True)

    @classmethod
    def fused_projections(cls, cfg: ArchConfig) -> FusedProjections:
        """QKV and gate/up each one matmul."""
        return ALL_FUSED
