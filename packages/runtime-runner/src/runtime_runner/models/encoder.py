"""A BERT-family encoder (all-MiniLM-L6-v2, bge-small): bidirectional attention over each input,
no KV cache, its last hidden rows pooled into one embedding per input.

Many inputs run as one forward: their tokens are packed into one [tokens, hidden] matrix for every
row-wise step (embedding lookup, the projections, the norms, GELU), and attention runs input by
input over that input's rows only. The projections are the batch-invariant linear (each output row
a function of its input row alone), the norms are row-wise, GELU runs in whole vectors (torch's
scalar tail rounds otherwise), and an input's attention and pooling see only its own rows in a
computation of the same shape however many inputs share the forward, so an input's embedding is
bitwise the same alone or in any batch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from runtime_runner.errors import BatchError
from runtime_runner.kernels.quantized_tensor import int8_per_channel_of
from runtime_runner.loading.checkpoint import CheckpointReader
from runtime_runner.loading.encoder_config import EncoderConfig, read_encoder_config
from runtime_runner.loading.encoder_layout import WORD_EMBEDDINGS, encoder_prefix, encoder_tensors
from runtime_runner.loading.sentence_pooling import PoolingMode, PoolingSpec, pooling_spec_at
from runtime_runner.models.embedding_inputs import check_embedding_inputs
from runtime_runner.models.matrix_projection import Projection, linear_of
from runtime_runner.models.one_torch_thread import one_torch_thread
from runtime_runner.models.pooling import pooled
from runtime_runner.models.whole_vectors import in_whole_vectors


def encoder_projection(weight: torch.Tensor, bias: torch.Tensor, dtype: torch.dtype, int8: bool) -> Projection:
    """The batch-invariant linear of `weight` (fp32 as read; quantized to int8 per output channel
    where `int8`, as `--quantization int8` quantizes a decoder, else rounded to `dtype`) and `bias`,
    over rows of `dtype`."""
    linear = linear_of(batch_invariant=True, activation_dtype=dtype)
    return linear(int8_per_channel_of(weight) if int8 else weight.to(dtype), bias)


@dataclass(frozen=True)
class Norm:
    """A LayerNorm's weight and bias."""

    weight: torch.Tensor
    bias: torch.Tensor


@dataclass(frozen=True)
class EncoderLayer:
    """One transformer block, post-norm as BERT computes it."""

    qkv: Projection  # rows -> q|k|v side by side
    attention_out: Projection
    attention_norm: Norm
    intermediate: Projection
    output: Projection
    output_norm: Norm


class BertEncoder:
    """The encoder of a BERT checkpoint and its pooling: `embed(inputs)` -> one vector per input."""

    def __init__(
        self,
        config: EncoderConfig,
        reader: CheckpointReader,
        pooling: PoolingSpec,
        dtype: torch.dtype,
        int8: bool = False,
    ) -> None:
        self.config = config
        self.pooling = pooling
        self.dtype = dtype
        self.int8 = int8
        prefix = encoder_prefix(set(reader.names()))
        shapes = {spec.name: spec.shape for spec in encoder_tensors(config, prefix)}
        cpu = torch.device("cpu")

        def read(name: str, as_dtype: torch.dtype = dtype) -> torch.Tensor:
            return reader.read(prefix + name, shapes[prefix + name], as_dtype, cpu)

        def norm(name: str) -> Norm:
            return Norm(read(name + ".weight"), read(name + ".bias"))

        def dense(*names: str) -> Projection:
            # The named layers' rows stacked into one projection (q, k and v as one).
            weight = torch.cat([read(n + ".weight", torch.float32) for n in names])
            return encoder_projection(weight, torch.cat([read(n + ".bias") for n in names]), dtype, int8)

        self.word = read(WORD_EMBEDDINGS)
        self.position = read("embeddings.position_embeddings.weight")
        self.segments = read("embeddings.token_type_embeddings.weight")
        self.embedding_norm = norm("embeddings.LayerNorm")
        self.layers: list[EncoderLayer] = []
        for i in range(config.num_layers):
            at = f"encoder.layer.{i}."
            parts = [at + f"attention.self.{p}" for p in ("query", "key", "value")]
            self.layers.append(
                EncoderLayer(
                    qkv=dense(*parts),
                    attention_out=dense(at + "attention.output.dense"),
                    attention_norm=norm(at + "attention.output.LayerNorm"),
                    intermediate=dense(at + "intermediate.dense"),
                    output=dense(at + "output.dense"),
                    output_norm=norm(at + "output.LayerNorm"),
                )
            )

    @classmethod
    def load(
        cls, model_dir: Path, dtype: torch.dtype = torch.float32, pooling: PoolingMode | None = None, int8: bool = False
    ) -> BertEncoder:
        """The encoder of the checkpoint at `model_dir`, on the CPU in `dtype` (float32 or bfloat16:
        the batch-invariant linear's), its projections quantized to int8 where `int8`, pooled as
        its sentence-transformers config says, or by `pooling` where given (its normalization kept)."""
        if dtype not in (torch.float32, torch.bfloat16):
            raise ValueError(f"the encoder runs in float32 or bfloat16; got {dtype}")
        spec = pooling_spec_at(model_dir)
        if pooling is not None:
            spec = PoolingSpec(mode=pooling, normalize=spec.normalize)
        return cls(read_encoder_config(model_dir), CheckpointReader(model_dir), spec, dtype, int8)

    def _layer_norm(self, rows: torch.Tensor, norm: Norm) -> torch.Tensor:
        return F.layer_norm(rows, (self.config.hidden_size,), norm.weight, norm.bias, self.config.layer_norm_eps)

    def _attention(self, qkv: torch.Tensor, lengths: Sequence[int]) -> torch.Tensor:
        """Each input's bidirectional attention over its own rows of qkv [tokens, 3 * hidden] (call
        under `one_torch_thread`)."""
        heads, head_dim, hidden = self.config.num_heads, self.config.head_dim, self.config.hidden_size
        scale = 1.0 / math.sqrt(head_dim)
        out: list[torch.Tensor] = []
        for rows in torch.split(qkv, list(lengths)):
            q, k, v = (
                rows[:, j * hidden : (j + 1) * hidden].reshape(-1, heads, head_dim).transpose(0, 1) for j in range(3)
            )
            weights = torch.softmax(torch.matmul(q, k.transpose(1, 2)) * scale, dim=-1)
            out.append(torch.matmul(weights, v).transpose(0, 1).reshape(-1, hidden))
        return torch.cat(out)

    @torch.inference_mode()
    def hidden_rows(
        self, inputs: Sequence[Sequence[int]], token_types: Sequence[Sequence[int]] = ()
    ) -> list[torch.Tensor]:
        """Each input's last hidden rows [length, hidden], its tokens in the segments
        `token_types` gives (unset: all segment 0, one text); BatchError for an empty input, one
        longer than the model's positions, a token id outside its vocabulary, or token types that
        do not match the inputs."""
        check_embedding_inputs(inputs, self.config.max_position_embeddings, self.config.vocab_size)
        lengths = [len(ids) for ids in inputs]
        if token_types and [len(types) for types in token_types] != lengths:
            raise BatchError("token_types holds other lengths than the inputs; accepted: one type per token")
        ids = torch.tensor([t for one in inputs for t in one], dtype=torch.long)
        types = torch.tensor([t for one in token_types for t in one] if token_types else [0] * len(ids))
        if token_types and not bool(((types >= 0) & (types < self.config.type_vocab_size)).all()):
            raise BatchError(f"a token type is outside 0 to {self.config.type_vocab_size - 1}")
        positions = torch.cat([torch.arange(n) for n in lengths])
        x = self.word[ids] + self.position[positions] + self.segments[types]
        x = self._layer_norm(x, self.embedding_norm)
        for layer in self.layers:
            qkv = layer.qkv(x)
            with one_torch_thread():
                mixed = self._attention(qkv, lengths)
            attended = layer.attention_out(mixed)
            x = self._layer_norm(attended + x, layer.attention_norm)
            widened = in_whole_vectors(F.gelu, layer.intermediate(x))
            x = self._layer_norm(layer.output(widened) + x, layer.output_norm)
        return list(torch.split(x, lengths))

    def embed(self, inputs: Sequence[Sequence[int]]) -> list[torch.Tensor]:
        """One fp32 embedding [hidden] per input of token ids (the tokenizer's, [CLS] and [SEP] included)."""
        rows = self.hidden_rows(inputs)
        with one_torch_thread():
            return [pooled(one, self.pooling) for one in rows]
