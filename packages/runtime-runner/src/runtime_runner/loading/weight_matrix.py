"""A weight matrix as the loader hands it to the decoder: a dense tensor, or a QuantizedTensor kept
in its blocks (a GGUF file's block types, or per-channel int8 quantized at load). Once the decoder
has packed a quantized matrix into its kernel's layout, that packed copy is the only one: the
decoder's weights then hold a KernelOwned in its place.

Every kind is a matrix of independent rows, so a fused group (q|k|v, gate|up) is its parts' rows
one after another whatever the kind, and an unfused group is split back into them by rows. Parts
of one kind are joined into one matrix (one matmul); parts of different kinds (llama-quantize's
Q4_K_M writes a Q8_0 v beside Q5_0 q and k) stay apart as StackedRows, run one matmul per run of
one kind, their outputs side by side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import overload

import torch

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
    def of(cls, matrix: RowGroup) -> KernelOwned:
        """The description of `matrix`."""
        return cls(kind_of(matrix), (int(matrix.shape[0]), int(matrix.shape[1])))


@dataclass(frozen=True)
class StackedRows:
    """A fused group whose rows are runs of different kinds (a Q5_0 q|k, then a Q8_0 v), each run
    kept as loaded: the group's rows are the runs' rows one after another."""

    runs: tuple[Matrix, ...]  # two or more; neighbours differ in kind

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, in_features) of the whole group."""
        return sum(int(run.shape[0]) for run in self.runs), int(self.runs[0].shape[1])

    @property
    def kind(self) -> str:
        """The runs' kinds in order, `q5_0|q8_0`."""
        return "|".join(kind_of(run) for run in self.runs)


RowGroup = Matrix | StackedRows  # a group's rows as loaded: one matrix, or runs of different kinds
HeldMatrix = Matrix | KernelOwned  # what a decoder's weights hold in a matrix's place
HeldGroup = RowGroup | KernelOwned  # what they hold in a group's place


def kind_of(matrix: HeldGroup) -> str:
    """What a matrix holds, as a message names it: its quantized kind, its dtype, or a stack's
    kinds in order (`q5_0|q8_0`)."""
    return str(matrix.dtype).removeprefix("torch.") if isinstance(matrix, torch.Tensor) else matrix.kind


@overload
def loaded(matrix: HeldMatrix) -> Matrix: ...
@overload
def loaded(matrix: HeldGroup) -> RowGroup: ...
def loaded(matrix: HeldGroup) -> RowGroup:
    """`matrix` as loaded; TypeError for one a kernel already owns (packed once, never twice)."""
    if isinstance(matrix, KernelOwned):
        raise TypeError(
            f"a {matrix.kind} matrix {matrix.shape} was packed already and its loaded copy given up; "
            "accepted: weights as load_decoder_weights answers them"
        )
    return matrix


def cat_rows(parts: Sequence[Matrix]) -> RowGroup:
    """The parts' rows one after another: neighbours of one kind joined into one matrix (one matmul),
    a group of several kinds as StackedRows of its runs."""
    runs: list[list[Matrix]] = []
    for part in parts:
        if runs and kind_of(runs[-1][0]) == kind_of(part):
            runs[-1].append(part)
        else:
            runs.append([part])
    joined = tuple(_joined(run) for run in runs)
    return joined[0] if len(joined) == 1 else StackedRows(joined)


def _joined(run: Sequence[Matrix]) -> Matrix:
    """Matrices of one kind, their rows one after another."""
    dense = [part for part in run if isinstance(part, torch.Tensor)]
    if len(dense) == len(run):
        return torch.cat(dense)
    return QuantizedTensor.cat([part for part in run if isinstance(part, QuantizedTensor)])


def split_rows(group: RowGroup, rows: Sequence[int]) -> tuple[Matrix, ...]:
    """The group's consecutive row blocks of `rows` rows each (views of a dense matrix); a block of
    StackedRows lies within one of its runs, as the parts it was stacked of do. ValueError otherwise."""
    if sum(rows) != group.shape[0]:
        raise ValueError(f"row blocks {list(rows)} do not cover the {group.shape[0]} rows of a {kind_of(group)} group")
    runs = list(group.runs) if isinstance(group, StackedRows) else [group]
    blocks: list[Matrix] = []
    at = 0  # the next block's first row in runs[0]
    for count in rows:
        run = runs[0]
        if at + count > run.shape[0]:
            raise ValueError(f"row blocks {list(rows)} cut across the runs of a {kind_of(group)} group")
        blocks.append(
            run[at : at + count] if isinstance(run, torch.Tensor) else run.rows_at(torch.arange(at, at + count))
        )
        at += count
        if at == run.shape[0]:
            runs.pop(0)
            at = 0
    return tuple(blocks)
