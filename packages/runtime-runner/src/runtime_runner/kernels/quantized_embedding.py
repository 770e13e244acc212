"""Token embedding rows read from a quantized table: the rows of ids, de-quantized.

A GGUF checkpoint keeps its token embedding quantized (Q8_0 in the default model), and a model
with tied embeddings uses that one table as its LM head too. So the embedding reads the very
panels the LM head's QuantizedLinear holds (`tied_to`), and no second copy of the table exists.
Each value is de-quantized exactly as `QuantizedTensor.dequantize` does (in fp32) and rounded
once to the activation dtype; a row is a copy, so the embedding is batch-invariant.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from runtime_runner.kernels.quantized_linear import QuantizedLinear, library
from runtime_runner.kernels.quantized_tensor import QuantizedTensor


@dataclass(frozen=True, eq=False)
class QuantizedEmbedding:
    """Rows of a quantized table [vocab, hidden] as dense activations."""

    table: QuantizedLinear  # its panels are the table (shared with a tied LM head)

    @classmethod
    def of(cls, table: QuantizedTensor, activation_dtype: torch.dtype) -> QuantizedEmbedding:
        """An embedding of its own over `table` [vocab, hidden], giving `activation_dtype` rows
        (float32 or bfloat16; ValueError otherwise)."""
        return cls(QuantizedLinear.of(table, None, activation_dtype))

    @classmethod
    def tied_to(cls, lm_head: QuantizedLinear) -> QuantizedEmbedding:
        """The embedding that reads `lm_head`'s own panels, in its activation dtype."""
        return cls(lm_head)

    @property
    def num_embeddings(self) -> int:
        """The number of rows (the vocabulary)."""
        return self.table.out_features

    @property
    def embedding_dim(self) -> int:
        """The length of a row (the hidden size)."""
        return self.table.in_features

    def __call__(self, ids: torch.Tensor) -> torch.Tensor:
        """Rows `ids` (a CPU 1-D integer tensor, each in [0, num_embeddings)) as a new
        [len(ids), embedding_dim] of the activation dtype. ValueError for anything else."""
        if (
            ids.device.type != "cpu"
            or ids.dim() != 1
            or ids.dtype.is_floating_point
            or ids.dtype.is_complex
            or ids.dtype == torch.bool
        ):
            raise ValueError(
                f"QuantizedEmbedding takes a CPU 1-D integer tensor of ids; got shape {tuple(ids.shape)}, "
                f"dtype {ids.dtype}, device {ids.device}"
            )
        wide = ids.to(torch.int64).contiguous()
        if wide.numel() and (int(wide.min()) < 0 or int(wide.max()) >= self.num_embeddings):
            raise ValueError(
                f"QuantizedEmbedding has ids in [0, {self.num_embeddings}); got ids from {int(wide.min())} "
                f"to {int(wide.max())}"
            )
        out = torch.empty(wide.numel(), self.embedding_dim, dtype=self.table.activation_dtype)
        if wide.numel():
            getattr(library(self.table.tier), f"quantized_rows_{self.table.suffix}")(
                self.table.native.matrix, wide.data_ptr(), wide.numel(), out.data_ptr()
            )
        return out
