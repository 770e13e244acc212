"""The decoder shape read from a checkpoint's config.json, as a frozen record."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime_runner.errors import CheckpointError, UnsupportedConfigError
from runtime_runner.loading.hybrid_config import HYBRID_ARCHITECTURES, HybridSpec, hybrid_spec_of


@dataclass(frozen=True)
class RopeSpec:
    """Rotary embedding parameters: the base and the scaling variant with its parameters."""

    theta: float
    rope_type: str  # default, linear, llama3, yarn
    params: tuple[tuple[str, float | int | bool | None], ...]  # the variant's extra parameters, sorted

    def param(self, name: str) -> float | int | bool | None:
        """One extra parameter, None when absent."""
        return dict(self.params).get(name)


@dataclass(frozen=True)
class ArchConfig:
    """Everything the decoder needs from config.json."""

    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    rms_norm_eps: float
    max_position_embeddings: int
    rope: RopeSpec
    tie_word_embeddings: bool
    attention_bias: bool
    mlp_bias: bool
    checkpoint_dtype: str
    eos_token_ids: tuple[int, ...]
    hybrid: HybridSpec | None = None  # a Gated-DeltaNet hybrid's layer kinds and linear layers

    @property
    def kv_layers(self) -> int:
        """Layers that hold K/V in the pool: every layer, or a hybrid's full-attention ones."""
        return self.num_layers if self.hybrid is None else len(self.hybrid.full_layers)


def rope_spec_of(raw: dict[str, Any]) -> RopeSpec:
    """RopeSpec from either the current `rope_parameters` or the older `rope_scaling` + `rope_theta`."""
    params = raw.get("rope_parameters") or raw.get("rope_scaling") or {}
    theta = float(params.get("rope_theta", raw.get("rope_theta", 10000.0)))
    rope_type = str(params.get("rope_type", params.get("type", "default")))
    extra = tuple(sorted((k, v) for k, v in params.items() if k not in ("rope_theta", "rope_type", "type")))
    return RopeSpec(theta=theta, rope_type=rope_type, params=extra)


def arch_config_of(raw: dict[str, Any]) -> ArchConfig:
    """ArchConfig from a parsed config.json; a missing required key raises naming it."""
    architectures = raw.get("architectures") or []
    if not architectures:
        raise CheckpointError("config.json has no 'architectures' list; accepted: a Hugging Face causal-LM config")
    if raw.get("use_sliding_window"):
        raise UnsupportedConfigError(
            "use_sliding_window=true is not supported; accepted: full attention on every layer"
        )
    hybrid = str(architectures[0]) in HYBRID_ARCHITECTURES
    if not hybrid and float(raw.get("partial_rotary_factor", 1.0)) != 1.0:
        raise UnsupportedConfigError(
            "partial_rotary_factor != 1 is not supported; accepted: rotary over the whole head"
        )
    try:
        heads = int(raw["num_attention_heads"])
        hidden = int(raw["hidden_size"])
        eos = raw.get("eos_token_id")
        eos_ids = tuple(int(e) for e in (eos if isinstance(eos, list) else [eos] if eos is not None else []))
        return ArchConfig(
            architecture=str(architectures[0]),
            vocab_size=int(raw["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(raw["intermediate_size"]),
            num_layers=int(raw["num_hidden_layers"]),
            num_heads=heads,
            num_kv_heads=int(raw.get("num_key_value_heads") or heads),
            head_dim=int(raw.get("head_dim") or hidden // heads),
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            max_position_embeddings=int(raw.get("max_position_embeddings", 2048)),
            rope=rope_spec_of(raw),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            attention_bias=bool(raw.get("attention_bias", False)),
            mlp_bias=bool(raw.get("mlp_bias", False)),
            checkpoint_dtype=str(raw.get("dtype") or raw.get("torch_dtype") or "float32"),
            eos_token_ids=eos_ids,
            hybrid=hybrid_spec_of(raw) if hybrid else None,
        )
    except KeyError as missing:
        raise CheckpointError(
            f"config.json lacks required key {missing}; accepted: a Llama-family decoder config"
        ) from None


def read_arch_config(model_dir: Path) -> ArchConfig:
    """Parse `model_dir/config.json`."""
    path = model_dir / "config.json"
    if not path.is_file():
        raise CheckpointError(
            f"no config.json in {model_dir}; accepted: a Hugging Face checkpoint directory (config.json + "
            "*.safetensors)"
        )
    return arch_config_of(json.loads(path.read_text()))
