"""The shape of a Gated-DeltaNet hybrid (Qwen3-Next, Qwen3.5 text) read from its config.json.

A hybrid interleaves linear-attention layers (a causal conv, then the gated delta rule over a
per-request recurrent state) with gated full-attention layers whose rotary covers only part of
each head; Qwen3-Next's MLPs may be sparse mixtures of experts with a shared expert.
docs/hybrid-models-reference.md is the layer-by-layer specification.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from runtime_runner.errors import CheckpointError, UnsupportedConfigError

HYBRID_ARCHITECTURES = ("Qwen3NextForCausalLM", "Qwen3_5ForCausalLM")
LayerKind = Literal["linear_attention", "full_attention"]
# transformers reads these older names as the two kinds.
_LEGACY_KINDS: dict[str, LayerKind] = {
    "attention": "full_attention",
    "mamba": "linear_attention",
    "conv": "linear_attention",
}


@dataclass(frozen=True)
class LinearAttnShape:
    """A Gated-DeltaNet layer's dimensions."""

    key_heads: int
    value_heads: int
    key_dim: int  # per head
    value_dim: int  # per head
    conv_width: int

    @property
    def keys(self) -> int:
        """Width of the flat q (and of k): key_heads * key_dim."""
        return self.key_heads * self.key_dim

    @property
    def values(self) -> int:
        """Width of the flat v (and of the gate z): value_heads * value_dim."""
        return self.value_heads * self.value_dim

    @property
    def conv_channels(self) -> int:
        """Channels of the causal conv: q, k and v side by side."""
        return 2 * self.keys + self.values


@dataclass(frozen=True)
class MoeShape:
    """A sparse MLP: routed experts, the top-k each token takes, and the gated shared expert."""

    experts: int
    top_k: int
    expert_intermediate: int
    shared_intermediate: int
    norm_topk_prob: bool


@dataclass(frozen=True)
class HybridSpec:
    """What a hybrid checkpoint adds to the decoder shape: each layer's kind, the linear layers'
    dimensions, the rotary width, and which layers' MLPs are sparse."""

    layer_kinds: tuple[LayerKind, ...]
    linear: LinearAttnShape
    rotary_dim: int  # the leading dims of each q/k head that rotate
    moe: MoeShape | None
    sparse_layers: frozenset[int]  # layers whose MLP is `moe` (the others are dense)

    @property
    def full_layers(self) -> tuple[int, ...]:
        """The full-attention layers, in order: the layers that hold KV."""
        return tuple(i for i, kind in enumerate(self.layer_kinds) if kind == "full_attention")

    @property
    def linear_layers(self) -> tuple[int, ...]:
        """The Gated-DeltaNet layers, in order: the layers that hold recurrent state."""
        return tuple(i for i, kind in enumerate(self.layer_kinds) if kind == "linear_attention")


def _layer_kinds(raw: dict[str, Any], layers: int) -> tuple[LayerKind, ...]:
    named = raw.get("layer_types")
    if named is None:
        interval = int(raw.get("full_attention_interval", 4))
        return tuple("full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(layers))
    kinds: list[LayerKind] = []
    for name in named:
        kind = _LEGACY_KINDS.get(name, name)
        if kind not in ("linear_attention", "full_attention"):
            raise UnsupportedConfigError(f"layer_types holds {name!r}; accepted: linear_attention, full_attention")
        kinds.append(kind)
    if len(kinds) != layers:
        raise CheckpointError(f"layer_types names {len(kinds)} layers but num_hidden_layers is {layers}")
    return tuple(kinds)


def _moe_of(raw: dict[str, Any], architecture: str, layers: int) -> tuple[MoeShape | None, frozenset[int]]:
    experts = int(raw.get("num_experts") or 0) if architecture == "Qwen3NextForCausalLM" else 0
    if experts == 0:
        return None, frozenset()
    step = int(raw.get("decoder_sparse_step", 1))
    dense = set(raw.get("mlp_only_layers") or ())
    sparse = frozenset(i for i in range(layers) if i not in dense and (i + 1) % step == 0)
    top_k = int(raw["num_experts_per_tok"])
    if not 1 <= top_k <= experts:
        raise CheckpointError(f"num_experts_per_tok = {top_k}; accepted: 1 .. num_experts ({experts})")
    moe = MoeShape(
        experts=experts,
        top_k=top_k,
        expert_intermediate=int(raw["moe_intermediate_size"]),
        shared_intermediate=int(raw.get("shared_expert_intermediate_size") or 0),
        norm_topk_prob=bool(raw.get("norm_topk_prob", True)),
    )
    return moe, sparse


def hybrid_spec_of(raw: dict[str, Any]) -> HybridSpec:
    """HybridSpec from a parsed hybrid config.json; a missing key or an unservable value raises naming it."""
    architecture = str((raw.get("architectures") or [""])[0])
    try:
        layers = int(raw["num_hidden_layers"])
        kinds = _layer_kinds(raw, layers)
        linear = LinearAttnShape(
            key_heads=int(raw["linear_num_key_heads"]),
            value_heads=int(raw["linear_num_value_heads"]),
            key_dim=int(raw["linear_key_head_dim"]),
            value_dim=int(raw["linear_value_head_dim"]),
            conv_width=int(raw["linear_conv_kernel_dim"]),
        )
        head_dim = int(raw.get("head_dim") or int(raw["hidden_size"]) // int(raw["num_attention_heads"]))
        moe, sparse = _moe_of(raw, architecture, layers)
    except KeyError as missing:
        raise CheckpointError(
            f"config.json lacks required key {missing}; accepted: a Qwen3-Next or Qwen3.5 text config"
        ) from None
    if linear.value_heads % linear.key_heads:
        raise UnsupportedConfigError(
            f"linear_num_value_heads = {linear.value_heads} is not a multiple of linear_num_key_heads = "
            f"{linear.key_heads}; accepted: value heads that share key heads evenly"
        )
    rope = raw.get("rope_parameters") or {}
    factor = float(rope.get("partial_rotary_factor", raw.get("partial_rotary_factor", 0.25)))
    rotary_dim = int(head_dim * factor)
    if rotary_dim < 2 or rotary_dim % 2:
        raise UnsupportedConfigError(
            f"partial_rotary_factor = {factor} rotates {rotary_dim} of {head_dim} dims; accepted: an even count >= 2"
        )
    return HybridSpec(layer_kinds=kinds, linear=linear, rotary_dim=rotary_dim, moe=moe, sparse_layers=sparse)
