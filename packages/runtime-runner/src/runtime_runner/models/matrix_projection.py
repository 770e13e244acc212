"""The projection and the embedding lookup of a weight matrix, whatever its kind: a dense matrix runs
the batch-invariant linear (or oneDNN's packed one when batch invariance is off), a quantized one
the quantized kernel, which is batch-invariant in either mode and keeps no dense copy."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from runtime_runner.kernels.batch_invariant_linear import InvariantLinear
from runtime_runner.kernels.packed_linear import PackedLinear
from runtime_runner.kernels.quantized_embedding import QuantizedEmbedding
from runtime_runner.kernels.quantized_linear import QuantizedLinear
from runtime_runner.kernels.quantized_tensor import QuantizedTensor
from runtime_runner.loading.weight_matrix import Matrix

# rows [T, in] -> rows [T, out]: a PackedLinear, an InvariantLinear, a QuantizedLinear, or a group of them
Projection = Callable[[torch.Tensor], torch.Tensor]
# (weight [out, in], dense or quantized; bias [out] or None) -> its projection, packed once
LinearOf = Callable[[Matrix, torch.Tensor | None], Projection]
# token ids [T] -> embedding rows [T, hidden]
Embedding = Callable[[torch.Tensor], torch.Tensor]


def linear_of(batch_invariant: bool, activation_dtype: torch.dtype) -> LinearOf:
    """How a decoder packs each matrix: a QuantizedTensor as a QuantizedLinear over
    `activation_dtype` rows; a dense one as an InvariantLinear (`batch_invariant`) or a PackedLinear."""
    dense = InvariantLinear.of if batch_invariant else PackedLinear.of

    def of(weight: Matrix, bias: torch.Tensor | None) -> Projection:
        if isinstance(weight, QuantizedTensor):
            return QuantizedLinear.of(weight, bias, activation_dtype)
        return dense(weight, bias)

    return of


def embedding_of(table: Matrix, tied_head: Projection | None, activation_dtype: torch.dtype) -> Embedding:
    """The lookup of `table`: torch's for a dense one; for a quantized one the kernel's rows, read
    from the LM head's own packed table when `tied_head` (the projection packed over this very
    table, for a tied model) is a QuantizedLinear, so the table is held once."""
    if isinstance(table, torch.Tensor):
        return lambda ids: F.embedding(ids, table)
    if isinstance(tied_head, QuantizedLinear):
        return QuantizedEmbedding.tied_to(tied_head)
    return QuantizedEmbedding.of(table, activation_dtype)
