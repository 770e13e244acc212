"""The shape of a BERT-family encoder read from a checkpoint's config.json, as a frozen record."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from runtime_runner.errors import CheckpointError, UnsupportedConfigError

# The cross-encoders: a BERT whose pooled [CLS] row a classifier turns into a relevance score.
CROSS_ENCODER_ARCHITECTURES = ("BertForSequenceClassification",)
ENCODER_ARCHITECTURES = ("BertModel", *CROSS_ENCODER_ARCHITECTURES)
# sentence-transformers' CrossEncoder activations of its logits, by the path its config names.
_ACTIVATIONS = {
    "torch.nn.modules.activation.Sigmoid": "sigmoid",
    "torch.nn.Sigmoid": "sigmoid",
    "torch.nn.modules.linear.Identity": "identity",
    "torch.nn.Identity": "identity",
}
ScoreActivation = Literal["sigmoid", "identity"]


@dataclass(frozen=True)
class EncoderConfig:
    """Everything the encoder needs from config.json."""

    architecture: str
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float
    num_labels: int  # a cross-encoder's classifier outputs
    score_activation: ScoreActivation  # what a cross-encoder's score is of its logit

    @property
    def head_dim(self) -> int:
        """Features per attention head."""
        return self.hidden_size // self.num_heads


def _score_activation(raw: dict[str, Any]) -> ScoreActivation:
    """The activation sentence-transformers' CrossEncoder applies to the logit: the one its config
    names (sentence_transformers.activation_fn, or the older sbert_ce_default_activation_function),
    else sigmoid, as CrossEncoder defaults for one label."""
    named = (raw.get("sentence_transformers") or {}).get("activation_fn") or raw.get(
        "sbert_ce_default_activation_function"
    )
    if named is None:
        return "sigmoid"
    if named not in _ACTIVATIONS:
        raise UnsupportedConfigError(
            f"config.json names the score activation {named!r}; accepted: {', '.join(sorted(_ACTIVATIONS))}"
        )
    activation: ScoreActivation = "sigmoid" if _ACTIVATIONS[named] == "sigmoid" else "identity"
    return activation


def encoder_config_of(raw: dict[str, Any]) -> EncoderConfig:
    """EncoderConfig from a parsed config.json; what this encoder does not compute (another
    activation, relative positions, a hidden size the heads do not divide) raises naming the key."""
    architectures = raw.get("architectures") or []
    if not architectures or architectures[0] not in ENCODER_ARCHITECTURES:
        raise CheckpointError(
            f"config.json names architectures {architectures!r}; accepted: {', '.join(ENCODER_ARCHITECTURES)}"
        )
    # BERT's "gelu" is the exact (erf) GELU; the tanh approximation rounds otherwise.
    if raw.get("hidden_act", "gelu") != "gelu":
        raise UnsupportedConfigError(f"config.json hidden_act = {raw['hidden_act']!r}; accepted: 'gelu'")
    if raw.get("position_embedding_type", "absolute") != "absolute":
        raise UnsupportedConfigError(
            f"config.json position_embedding_type = {raw['position_embedding_type']!r}; accepted: 'absolute'"
        )
    try:
        config = EncoderConfig(
            architecture=str(architectures[0]),
            vocab_size=int(raw["vocab_size"]),
            hidden_size=int(raw["hidden_size"]),
            intermediate_size=int(raw["intermediate_size"]),
            num_layers=int(raw["num_hidden_layers"]),
            num_heads=int(raw["num_attention_heads"]),
            max_position_embeddings=int(raw["max_position_embeddings"]),
            type_vocab_size=int(raw.get("type_vocab_size", 2)),
            layer_norm_eps=float(raw.get("layer_norm_eps", 1e-12)),
            num_labels=len(raw.get("id2label") or {}) or int(raw.get("num_labels", 2)),
            score_activation=_score_activation(raw),
        )
    except KeyError as missing:
        raise CheckpointError(f"config.json lacks required key {missing}; accepted: a BERT config") from None
    if config.num_heads < 1 or config.hidden_size % config.num_heads:
        raise UnsupportedConfigError(
            f"config.json num_attention_heads = {config.num_heads} does not divide hidden_size = "
            f"{config.hidden_size}; accepted: heads of equal size"
        )
    return config


def read_encoder_config(model_dir: Path) -> EncoderConfig:
    """Parse `model_dir/config.json` as an encoder's."""
    path = model_dir / "config.json"
    if not path.is_file():
        raise CheckpointError(f"no config.json in {model_dir}; accepted: a Hugging Face BERT checkpoint directory")
    return encoder_config_of(json.loads(path.read_text()))
