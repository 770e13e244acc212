"""A BERT cross-encoder (BertForSequenceClassification, as sentence-transformers' CrossEncoder
serves rerankers): each (query, document) pair runs through the encoder as one input of two
segments, its [CLS] row through the pooler (dense, tanh) and the classifier, and the logit through
the activation the checkpoint's config names (sigmoid by default), as CrossEncoder.predict scores.

The pooler and classifier are the batch-invariant linear over the pairs' [CLS] rows, and tanh and
sigmoid run in whole vectors (torch's scalar tail rounds otherwise), so a pair's score, like an
embedding, is bitwise the same whatever it is batched with."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from runtime_runner.errors import UnsupportedConfigError
from runtime_runner.loading.checkpoint import CheckpointReader
from runtime_runner.loading.encoder_config import read_encoder_config
from runtime_runner.loading.encoder_layout import cross_encoder_head_tensors
from runtime_runner.loading.sentence_pooling import UNCONFIGURED
from runtime_runner.models.encoder import BertEncoder, encoder_projection
from runtime_runner.models.matrix_projection import Projection
from runtime_runner.models.whole_vectors import in_whole_vectors


class BertCrossEncoder:
    """`score(pairs, token_types)` -> one relevance score per pair."""

    def __init__(self, encoder: BertEncoder, reader: CheckpointReader) -> None:
        config = encoder.config
        if config.num_labels != 1:
            raise UnsupportedConfigError(
                f"config.json gives the classifier {config.num_labels} labels; accepted: 1 (a relevance score)"
            )
        self.encoder = encoder
        cpu, dtype = torch.device("cpu"), encoder.dtype
        tensors = {
            spec.name: reader.read(spec.name, spec.shape, torch.float32, cpu)
            for spec in cross_encoder_head_tensors(config)
        }

        def head(name: str) -> Projection:
            return encoder_projection(tensors[name + ".weight"], tensors[name + ".bias"].to(dtype), dtype, encoder.int8)

        self.pooler = head("bert.pooler.dense")
        self.classifier = head("classifier")
        self.sigmoid = config.score_activation == "sigmoid"

    @classmethod
    def load(cls, model_dir: Path, dtype: torch.dtype = torch.float32, int8: bool = False) -> BertCrossEncoder:
        """The cross-encoder of the checkpoint at `model_dir`, on the CPU in `dtype` (float32 or
        bfloat16), its projections (the head's too) quantized to int8 where `int8`."""
        reader = CheckpointReader(model_dir)
        # The encoder's rows feed the pooler, not a sentence pooling: its pooling spec goes unused.
        return cls(BertEncoder(read_encoder_config(model_dir), reader, UNCONFIGURED, dtype, int8), reader)

    @torch.inference_mode()
    def score(self, pairs: Sequence[Sequence[int]], token_types: Sequence[Sequence[int]]) -> list[float]:
        """One score per pair of token ids (the tokenizer's pair encoding) in segments `token_types`."""
        rows = self.encoder.hidden_rows(pairs, token_types)
        first = torch.stack([one[0] for one in rows])
        logits = self.classifier(in_whole_vectors(torch.tanh, self.pooler(first))).float()[:, 0]
        return (in_whole_vectors(torch.sigmoid, logits) if self.sigmoid else logits).tolist()
