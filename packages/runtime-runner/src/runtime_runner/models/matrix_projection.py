"""The projection and the embedding lookup of a weight matrix, whatever its kind: a dense matrix runs
the batch-invariant linear (or oneDNN's packed one when batch invariance is off), a quantized one
the quantized kernel, which is batch-invariant in either mode and keeps no dense copy; and the
projection of a group of matrices concatenated by rows (q|k|v, gate|up), fused (one matmul, or
one per run of one kind where the matrices differ in kind) or one per part."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from native_build import CpuTier
from runtime_runner.kernels.batch_invariant_linear import InvariantLinear
from runtime_runner.kernels.native_projection import NativeProjection, NativeProjectionEntry
from runtime_runner.kernels.packed_linear import PackedLinear
from runtime_runner.kernels.projection_stack import ProjectionStack
from runtime_runner.kernels.quantized_embedding import QuantizedEmbedding
from runtime_runner.kernels.quantized_linear import QuantizedActivations, QuantizedLinear
from runtime_runner.kernels.quantized_tensor import QuantizedTensor
from runtime_runner.loading.weight_matrix import Matrix, RowGroup, StackedRows, split_rows

# rows [T, in] -> rows [T, out]: a PackedLinear, an InvariantLinear, a QuantizedLinear, or a group of them
Projection = Callable[[torch.Tensor], torch.Tensor]
# (weight [out, in], dense or quantized; bias [out] or None) -> its projection, packed once
LinearOf = Callable[[Matrix, torch.Tensor | None], Projection]
# token ids [T] -> embedding rows [T, hidden]
Embedding = Callable[[torch.Tensor], torch.Tensor]


def linear_of(
    batch_invariant: bool,
    activation_dtype: torch.dtype,
    quantized_activations: QuantizedActivations = "float32",
    cpu_tier: CpuTier | None = None,
) -> LinearOf:
    """How a decoder packs each matrix: a QuantizedTensor as a QuantizedLinear over
    `activation_dtype` rows read as `quantized_activations` (exec.kernel.quantized_activations) on
    the kernels of `cpu_tier` (exec.kernel.cpu_isa; None: this CPU's highest); a dense one as an
    InvariantLinear (`batch_invariant`) or a PackedLinear."""
    dense = InvariantLinear.of if batch_invariant else PackedLinear.of

    def of(weight: Matrix, bias: torch.Tensor | None) -> Projection:
        if isinstance(weight, QuantizedTensor):
            return QuantizedLinear.of(weight, bias, activation_dtype, quantized_activations, cpu_tier)
        return dense(weight, bias)

    return of


def kernel_copy_bytes(projection: Projection) -> int:
    """Bytes of the copy a projection packed of its matrix (0 where it runs the plain matrix)."""
    if isinstance(projection, InvariantLinear):
        return projection.panels.nbytes + (0 if projection.bias32 is None else projection.bias32.nbytes)
    if isinstance(projection, PackedLinear):
        # oneDNN's packed tensor is opaque (no storage to measure); _nbytes is its real allocation.
        return 0 if projection.packed is None else int(torch.ops.mkldnn._nbytes(projection.packed))
    raise TypeError(f"an LM head projection is a PackedLinear or an InvariantLinear; got {type(projection).__name__}")


def embedding_of(table: Matrix, tied_head: Projection | None, activation_dtype: torch.dtype) -> Embedding:
    """The lookup of `table`: torch's for a dense one; for a quantized one the kernel's rows, read
    from the LM head's own packed table when `tied_head` (the projection packed over this very
    table, for a tied model) is a QuantizedLinear, so the table is held once."""
    if isinstance(table, torch.Tensor):
        return lambda ids: F.embedding(ids, table)
    if isinstance(tied_head, QuantizedLinear):
        return QuantizedEmbedding.tied_to(tied_head)
    return QuantizedEmbedding.of(table, activation_dtype)


@dataclass(frozen=True)
class ConcatProjection:
    """A group run one matmul per part (an unfused group, or the runs of a group of several
    kinds), their outputs side by side."""

    parts: tuple[Projection, ...]

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """The group's output rows [T, sum of the parts' out]."""
        return torch.cat([part(x) for part in self.parts], dim=-1)

    @functools.cached_property
    def _stack(self) -> ProjectionStack | None:
        entries: list[NativeProjectionEntry] = []
        for part in self.parts:
            entry = part.native if isinstance(part, NativeProjection) else None
            if entry is None:
                return None
            entries.append(entry)
        return ProjectionStack.of(entries)

    @property
    def native(self) -> NativeProjectionEntry | None:
        """The parts' C entries run as one (the same kernels and a copy: the bits `__call__`
        gives), None where a part has none (oneDNN's packed linear)."""
        return None if self._stack is None else self._stack.native


def group_projection(
    linear: LinearOf, weight: RowGroup, bias: torch.Tensor | None, rows: Sequence[int], fused: bool
) -> Projection:
    """The projection of a concatenated group (`rows` output rows per checkpoint matrix): one matmul
    over the whole matrix when fused (one per run of StackedRows), else one per part over its rows."""
    if fused and not isinstance(weight, StackedRows):
        return linear(weight, bias)
    blocks = weight.runs if isinstance(weight, StackedRows) and fused else split_rows(weight, rows)
    widths = [int(block.shape[0]) for block in blocks]
    biases: Sequence[torch.Tensor | None] = [None] * len(blocks) if bias is None else torch.split(bias, widths)
    return ConcatProjection(tuple(linear(w, b) for w, b in zip(blocks, biases, strict=True)))
