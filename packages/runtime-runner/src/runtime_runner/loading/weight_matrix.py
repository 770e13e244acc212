"""A weight matrix as the loader hands it to the decoder: a dense tensor, or a QuantizedTensor kept
in its blocks (a GGUF file's Q8_0/Q4_0/Q4_1, or per-channel int8 quantized at load). Once the
decoder has packed a quantized matrix into its kernel's layout, that packed copy is the only one:
the decoder's weights then hold a KernelOwned in its place.

Every kind is a matrix of independent rows, so a fused group (q|k|v, gate|up) is its parts' rows
one after another whatever the kind, and an unfused group is split back into them by rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from runtime_runner.errors import CheckpointError
from runtime_runner.kernels.quantized_tensor import QuantizedTensor

Matrix = torch.Tensor | QuantizedTensor


@dataclass(frozen=True)
class KernelOwned:
    """A matrix given up to the projection (or embedding) packed from it, which holds its values in
    the kernel's layout; what is left is its description: its kind (a quantized kind, or a dense
    matrix's dtype, as `kind_of` names it) and its shape."""

    kind: str
    shape: tuple[int, int]

    @classmethod
    def of(cls, matrix: Matrix) -> KernelOwned:
        """The description of `matrix`."""
        return cls(kind_of(matrix), (int(matrix.shape[0]), int(matrix.shape[1])))


HeldMatrix = Matrix | KernelOwned  # what a decoder's weights hold in a matrix's place


def kind_of(matrix: HeldMatrix) -> str:
    """What a matrix holds, as a message names it: its quantized kind, or its dtype."""
    return str(matrix.dtype).removeprefix("torch.") if isinstance(matrix, torch.Tensor) else matrix.kind


def loaded(matrix: HeldMatrix) -> Matrix:
    """`matrix` as loaded; TypeError for one a kernel already owns (packed once, never twice)."""
    if isinstance(matrix, KernelOwned):
        raise TypeError(
            f"a {matrix.kind} matrix {matrix.shape} was packed already and its loaded copy given up; "
            "accepted: weights as load_decoder_weights answers them"
        )
    return matrix


def cat_rows(parts: Sequence[Matrix], names: Sequence[str]) -> Matrix:
    """The parts' rows one after another; parts of different kinds (a quantized q with a dense k, or
    Q8_0 with Q4_0) are refused naming each, since one group runs as one matmul of one kind."""
    if all(isinstance(part, torch.Tensor) for part in parts):
        return torch.cat([part for part in parts if isinstance(part, torch.Tensor)])
    quantized = [part for part in parts if isinstance(part, QuantizedTensor)]
    if len(quantized) != len(parts) or len({part.kind for part in quantized}) != 1:
        held = ", ".join(f"{name} {kind_of(part)}" for name, part in zip(names, parts, strict=True))
        raise CheckpointError(
            f"a fused projection group holds matrices of one kind; got {held}; accepted: a checkpoint whose "
            "q/k/v and gate/up matrices each share one type"
        )
    return QuantizedTensor.cat(quantized)


def split_rows(matrix: Matrix, rows: Sequence[int]) -> tuple[Matrix, ...]:
    """The matrix's consecutive row blocks of `rows` rows each (views of a dense matrix)."""
    if isinstance(matrix, torch.Tensor):
        return tuple(torch.split(matrix, list(rows)))
    starts = [sum(rows[:i]) for i in range(len(rows))]
    return tuple(matrix.rows_at(torch.arange(start, start + count)) for start, count in zip(starts, rows, strict=True))
