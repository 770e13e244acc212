"""The model a scheduler process of task embed or rerank serves: a BERT encoder, a cross-encoder,
or a decoder embedding (task embed on a decoder checkpoint), loaded as the published model bag
says, with its forward as one `Compute` and what the API must know of it (ModelInfo)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from config_bags.server import context_length_of, get_model
from runtime_runner.loading.checkpoint_source import arch_config_at
from runtime_runner.loading.encoder_config import ENCODER_ARCHITECTURES
from runtime_runner.loading.matryoshka import matryoshka_dimensions_at
from runtime_runner.loading.quantization_support import serves_quantized
from runtime_runner.models.cross_encoder import BertCrossEncoder
from runtime_runner.models.decoder_embedder import DecoderEmbedder
from runtime_runner.models.encoder import BertEncoder
from runtime_runner.placement import model_dtype_of
from serve.ipc.messages import ModelInfo

# inputs, their token types (empty: one segment) -> each input's output as float32 bytes
Compute = Callable[[list[tuple[int, ...]], list[tuple[int, ...]]], list[bytes]]


def embeddings_of(encoder: BertEncoder | DecoderEmbedder) -> Compute:
    """The encoder's (or decoder's) embeddings, each as its float32 bytes."""
    return lambda inputs, _types: [vector.numpy().tobytes() for vector in encoder.embed(inputs)]


def scores_of(cross_encoder: BertCrossEncoder) -> Compute:
    """The cross-encoder's scores of pairs, each as one float32's bytes."""
    return lambda inputs, types: [struct.pack("<f", score) for score in cross_encoder.score(inputs, types)]


@dataclass(frozen=True)
class Loaded:
    """The loaded model's forward and what the API must know of it."""

    compute: Compute
    info: ModelInfo


def load_embedding_model(path: Path) -> Loaded:
    """The cross-encoder (task rerank), the BERT encoder, or the decoder (task embed on a decoder
    checkpoint) at `path`, as the published model bag says, in model.dtype (auto: bfloat16 on the
    CPU, float32 for quantized weights, as the runner computes them)."""
    model_bag = get_model()
    dtype = model_dtype_of(model_bag, "float32", torch.device("cpu"), quantized=serves_quantized(model_bag, path))
    if model_bag.task == "rerank":
        cross_encoder = BertCrossEncoder.load(path, dtype, int8=model_bag.quantization == "int8")
        config = cross_encoder.encoder.config
        info = ModelInfo(
            context_length=context_length_of(model_bag, config.max_position_embeddings),
            max_total_tokens=0,
            vocab_size=config.vocab_size,
            runners={},
        )
        return Loaded(scores_of(cross_encoder), info)
    embedder: BertEncoder | DecoderEmbedder
    if arch_config_at(path).architecture in ENCODER_ARCHITECTURES:
        embedder = BertEncoder.load(path, dtype, model_bag.pooling, int8=model_bag.quantization == "int8")
        positions, vocab, size = (
            embedder.config.max_position_embeddings,
            embedder.config.vocab_size,
            embedder.config.hidden_size,
        )
    else:
        embedder = DecoderEmbedder.load(path, dtype, model_bag.pooling)
        positions, vocab, size = (
            embedder.decoder.cfg.max_position_embeddings,
            embedder.decoder.cfg.vocab_size,
            embedder.hidden_size,
        )
    info = ModelInfo(
        context_length=context_length_of(model_bag, positions),
        max_total_tokens=0,
        vocab_size=vocab,
        runners={},
        embedding_size=size,
        embeddings_normalized=embedder.pooling.normalize,
        matryoshka_dimensions=matryoshka_dimensions_at(path, size),
    )
    return Loaded(embeddings_of(embedder), info)
