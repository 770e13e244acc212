"""A Llama-family decoder's weights, read as the entry class's loader decisions say, each
projection group concatenated: one QKV and one gate/up matrix per layer (or, where a group's
matrices differ in kind, the runs of one kind stacked: weight_matrix.StackedRows). A matrix (a projection,
the embedding, the LM head) is dense or kept quantized, as the reader hands it (weight_matrix);
norms and biases are always dense. A decoder keeps its weights `released()`: each projection matrix
lives on only in the projection packed from it.

Concatenating lets a fused group run six projections per layer as three matmuls, which is what a
batch-1 decode on a CPU pays for (per-op overhead), not the flops.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

import torch

from runtime_runner.errors import CheckpointError
from runtime_runner.kernels.quantized_tensor import QuantizedTensor
from runtime_runner.loading.arch_config import ArchConfig
from runtime_runner.loading.checkpoint_layout import layout_tensors
from runtime_runner.loading.loader_hooks import LoaderDecisions
from runtime_runner.loading.tensor_names import EMBED, FINAL_NORM, LM_HEAD, layer_prefix
from runtime_runner.loading.weight_matrix import HeldGroup, HeldMatrix, KernelOwned, Matrix, RowGroup, cat_rows
from runtime_runner.loading.weight_reader import WeightReader

NOTHING_IN_HAND: Mapping[str, torch.Tensor] = MappingProxyType({})


@dataclass(frozen=True)
class LayerWeights:
    """One decoder layer."""

    input_norm: torch.Tensor
    qkv: HeldGroup
    qkv_bias: torch.Tensor | None
    q_norm: torch.Tensor | None
    k_norm: torch.Tensor | None
    o_proj: HeldMatrix
    o_bias: torch.Tensor | None
    post_norm: torch.Tensor
    gate_up: HeldGroup
    gate_up_bias: torch.Tensor | None
    down: HeldMatrix
    down_bias: torch.Tensor | None


@dataclass(frozen=True)
class DecoderWeights:
    """The whole decoder: embeddings, layers, final norm, LM head (the embeddings when tied)."""

    embed: HeldMatrix
    layers: tuple[LayerWeights, ...]
    final_norm: torch.Tensor
    lm_head: HeldMatrix

    def released(self) -> DecoderWeights:
        """These weights as a decoder that has packed them all keeps them: every layer's projection
        matrices, and a quantized embedding or LM head, replaced by their KernelOwned descriptions
        (the packed copy is then the only one). A dense embedding and LM head stay: the lookup reads
        the one, and a draft shares both with its target."""
        layers = tuple(
            replace(
                layer,
                qkv=_released(layer.qkv),
                o_proj=_released(layer.o_proj),
                gate_up=_released(layer.gate_up),
                down=_released(layer.down),
            )
            for layer in self.layers
        )
        return replace(
            self, embed=_released_if_quantized(self.embed), layers=layers, lm_head=_released_if_quantized(self.lm_head)
        )


def _released(matrix: HeldGroup) -> KernelOwned:
    return matrix if isinstance(matrix, KernelOwned) else KernelOwned.of(matrix)


def _released_if_quantized(matrix: HeldMatrix) -> HeldMatrix:
    return _released(matrix) if isinstance(matrix, QuantizedTensor) else matrix


def _bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and a.device == b.device and torch.equal(a, b)


def load_decoder_weights(
    reader: WeightReader,
    cfg: ArchConfig,
    decisions: LoaderDecisions,
    dtype: torch.dtype,
    device: torch.device,
    *,
    in_hand: Mapping[str, torch.Tensor] = NOTHING_IN_HAND,
) -> DecoderWeights:
    """Check that the checkpoint holds every tensor of `decisions.expected_tensors` (one CheckpointError
    names each that it lacks), then read, shape-check and concatenate what `decisions.weight_layout`
    and `decisions.tied_embeddings` say the decoder needs.

    `in_hand` holds tensors already loaded elsewhere (a draft's target's embedding and LM head): one
    stands in for the checkpoint's tensor of its name when the checkpoint lacks it or holds it
    bitwise equal, so no second copy is kept."""
    missing = [spec for spec in decisions.expected_tensors if not reader.has(spec.name) and spec.name not in in_hand]
    if missing:
        listed = ", ".join(f"tensor {spec.name!r} (expected shape {list(spec.shape)})" for spec in missing)
        raise CheckpointError(
            f"checkpoint {reader.model_dir} lacks {listed}; accepted: a checkpoint holding every tensor "
            f"its entry class expects ({len(decisions.expected_tensors)} here)"
        )
    layout, tied = decisions.weight_layout, decisions.tied_embeddings
    shapes = {spec.name: spec.shape for spec in layout_tensors(cfg, layout, tied)}

    def read(name: str) -> torch.Tensor:
        return reader.read(name, shapes[name], dtype, device)

    def matrix(name: str) -> Matrix:
        held = in_hand.get(name)
        if held is not None and not reader.has(name):
            if tuple(held.shape) != shapes[name]:
                raise CheckpointError(
                    f"checkpoint {reader.model_dir} lacks tensor {name!r} (expected shape {list(shapes[name])}) "
                    f"and the one in hand has shape {list(held.shape)}; accepted: a checkpoint holding it, "
                    f"or one in hand of that shape"
                )
            return held.to(dtype=dtype, device=device)
        loaded = reader.read_matrix(name, shapes[name], dtype, device)
        return (
            held if held is not None and isinstance(loaded, torch.Tensor) and _bitwise_equal(loaded, held) else loaded
        )

    def cat(*names: str) -> torch.Tensor:
        return torch.cat([read(name) for name in names])

    def cat_matrices(*names: str) -> RowGroup:
        return cat_rows([matrix(name) for name in names])

    layers = []
    for i in range(cfg.num_layers):
        p = layer_prefix(i)
        attn, mlp = p + "self_attn.", p + "mlp."
        layers.append(
            LayerWeights(
                input_norm=read(p + "input_layernorm.weight"),
                qkv=cat_matrices(attn + "q_proj.weight", attn + "k_proj.weight", attn + "v_proj.weight"),
                qkv_bias=cat(attn + "q_proj.bias", attn + "k_proj.bias", attn + "v_proj.bias")
                if layout.qkv_bias
                else None,
                q_norm=read(attn + "q_norm.weight") if layout.qk_norm else None,
                k_norm=read(attn + "k_norm.weight") if layout.qk_norm else None,
                o_proj=matrix(attn + "o_proj.weight"),
                o_bias=read(attn + "o_proj.bias") if layout.o_bias else None,
                post_norm=read(p + "post_attention_layernorm.weight"),
                gate_up=cat_matrices(mlp + "gate_proj.weight", mlp + "up_proj.weight"),
                gate_up_bias=cat(mlp + "gate_proj.bias", mlp + "up_proj.bias") if layout.mlp_bias else None,
                down=matrix(mlp + "down_proj.weight"),
                down_bias=read(mlp + "down_proj.bias") if layout.mlp_bias else None,
            )
        )
    embed = matrix(EMBED)
    lm_head = embed if tied else matrix(LM_HEAD)
    return DecoderWeights(embed=embed, layers=tuple(layers), final_norm=read(FINAL_NORM), lm_head=lm_head)
