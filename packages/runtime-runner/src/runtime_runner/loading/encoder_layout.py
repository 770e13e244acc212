"""What a BERT-family checkpoint holds for its encoder: every tensor name and shape, as BertModel
names them (a BertFor... checkpoint holds them under `bert.`)."""

from __future__ import annotations

from runtime_runner.loading.checkpoint_layout import TensorSpec
from runtime_runner.loading.encoder_config import EncoderConfig

WRAPPED_PREFIX = "bert."
WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"


def encoder_tensors(cfg: EncoderConfig, prefix: str = "") -> tuple[TensorSpec, ...]:
    """Every tensor the encoder reads (the pooler's are not: pooling is the checkpoint's sentence
    pooling), each name after `prefix`."""
    hidden, inter = cfg.hidden_size, cfg.intermediate_size
    shapes: dict[str, tuple[int, ...]] = {
        WORD_EMBEDDINGS: (cfg.vocab_size, hidden),
        "embeddings.position_embeddings.weight": (cfg.max_position_embeddings, hidden),
        "embeddings.token_type_embeddings.weight": (cfg.type_vocab_size, hidden),
        "embeddings.LayerNorm.weight": (hidden,),
        "embeddings.LayerNorm.bias": (hidden,),
    }
    for i in range(cfg.num_layers):
        at = f"encoder.layer.{i}."
        for part in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            shapes[at + part + ".weight"] = (hidden, hidden)
            shapes[at + part + ".bias"] = (hidden,)
        shapes[at + "intermediate.dense.weight"] = (inter, hidden)
        shapes[at + "intermediate.dense.bias"] = (inter,)
        shapes[at + "output.dense.weight"] = (hidden, inter)
        shapes[at + "output.dense.bias"] = (hidden,)
        for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
            shapes[at + norm + ".weight"] = (hidden,)
            shapes[at + norm + ".bias"] = (hidden,)
    return tuple(TensorSpec(prefix + name, shape) for name, shape in shapes.items())


def cross_encoder_head_tensors(cfg: EncoderConfig) -> tuple[TensorSpec, ...]:
    """The tensors a BertForSequenceClassification reads after its encoder: the pooler (a dense
    layer over the [CLS] row) under `bert.`, and the classifier."""
    hidden = cfg.hidden_size
    return (
        TensorSpec(WRAPPED_PREFIX + "pooler.dense.weight", (hidden, hidden)),
        TensorSpec(WRAPPED_PREFIX + "pooler.dense.bias", (hidden,)),
        TensorSpec("classifier.weight", (cfg.num_labels, hidden)),
        TensorSpec("classifier.bias", (cfg.num_labels,)),
    )


def encoder_prefix(names: frozenset[str] | set[str]) -> str:
    """The prefix the checkpoint holding tensors `names` keeps its encoder under."""
    return WRAPPED_PREFIX if WRAPPED_PREFIX + WORD_EMBEDDINGS in names else ""
