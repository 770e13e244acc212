"""A decoder (Llama, Qwen2, Qwen3: SmolLM2, Qwen3-Embedding) serving embeddings: its final-normed
hidden rows of each input, pooled (last token by default) and normalized, with no LM head run.

The decoder is the served one as the runner loads it (runtime_runner.models.model_loading, the
batch-invariant projections): its `hidden_states` forward runs once over every input's tokens
packed, with each layer's attention causal over the input's own rows (causal_attention) instead of
the paged KV cache, since nothing decodes after. Every other step of that forward is per row, so an
input's vector is bitwise the same alone or in any batch."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from config_bags.server import get_exec, get_model
from runtime_runner.errors import UnsupportedConfigError
from runtime_runner.loading.checkpoint_source import arch_config_at
from runtime_runner.loading.sentence_pooling import DECODER_UNCONFIGURED, PoolingMode, PoolingSpec, pooling_spec_at
from runtime_runner.models.causal_attention import causal_attention_of
from runtime_runner.models.decoder import DecoderForCausalLM
from runtime_runner.models.embedding_inputs import check_embedding_inputs
from runtime_runner.models.model_loading import load_target
from runtime_runner.models.one_torch_thread import one_torch_thread
from runtime_runner.models.pooling import pooled


class DecoderEmbedder:
    """`embed(inputs)` -> one vector per input, from a loaded decoder and its pooling."""

    def __init__(self, decoder: DecoderForCausalLM, pooling: PoolingSpec) -> None:
        self.decoder = decoder
        self.pooling = pooling

    @classmethod
    def load(cls, model_path: Path, dtype: torch.dtype, pooling: PoolingMode | None = None) -> DecoderEmbedder:
        """The decoder at `model_path` (a Hugging Face directory or a GGUF file) on the CPU in
        `dtype`, batch-invariant, its weights as model.quantization says (the published bags'),
        pooled as its sentence-transformers config says (Qwen3-Embedding: last token, normalized),
        else its last token's row normalized; `pooling` overrides the mode, its normalization kept.
        UnsupportedConfigError for a Gated-DeltaNet hybrid, whose recurrent layers this does not run."""
        cfg = arch_config_at(model_path)
        decoder = load_target(
            model_path, cfg, dtype, torch.device("cpu"), batch_invariant=True, model=get_model(), exec=get_exec()
        )
        if not isinstance(decoder, DecoderForCausalLM):
            raise UnsupportedConfigError(
                f"{cfg.architecture} is a Gated-DeltaNet hybrid, and embeddings run a Llama-family decoder; "
                "accepted: a Llama, Qwen2 or Qwen3 checkpoint"
            )
        spec = pooling_spec_at(model_path, DECODER_UNCONFIGURED)
        if pooling is not None:
            spec = PoolingSpec(mode=pooling, normalize=spec.normalize)
        return cls(decoder, spec)

    @property
    def hidden_size(self) -> int:
        """The length of an embedding."""
        return self.decoder.cfg.hidden_size

    @torch.inference_mode()
    def hidden_rows(self, inputs: Sequence[Sequence[int]]) -> list[torch.Tensor]:
        """Each input's final-normed hidden rows [length, hidden]; BatchError for an empty input, one
        longer than the model's positions, or a token id outside its vocabulary."""
        check_embedding_inputs(inputs, self.decoder.cfg.max_position_embeddings, self.decoder.cfg.vocab_size)
        lengths = [len(ids) for ids in inputs]
        ids = torch.tensor([t for one in inputs for t in one], dtype=torch.long)
        positions = torch.cat([torch.arange(n) for n in lengths])
        attention = causal_attention_of(lengths, self.decoder.attention_scale)
        return list(torch.split(self.decoder.hidden_states(ids, positions, attention), lengths))

    def embed(self, inputs: Sequence[Sequence[int]]) -> list[torch.Tensor]:
        """One fp32 embedding [hidden] per input of token ids (as the tokenizer gives them)."""
        rows = self.hidden_rows(inputs)
        with one_torch_thread():
            return [pooled(one, self.pooling) for one in rows]
