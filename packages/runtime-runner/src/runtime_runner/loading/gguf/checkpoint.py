"""Reading a GGUF checkpoint's tensors as the loader asks for them (the reader protocol of
runtime_runner.loading.weight_reader): dense tensors for F32/F16/BF16, and the matrices of every
block type the kernels serve (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K..Q6_K) kept in their
blocks as QuantizedTensors (copied out of the file once; no
de-quantized copy is made).

llama.cpp's converter writes each Q and K head of a Llama model with its rotary halves
interleaved (row 2j + i of a head holds half i's feature j); the reader puts each head's rows
back in halves, on whole rows, so a quantized matrix is reordered without touching its values.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from gguf import GGMLQuantizationType

from runtime_runner.errors import CheckpointError
from runtime_runner.kernels.quantized_tensor import KIND_OF_TYPE, QuantizedTensor
from runtime_runner.loading.arch_config import ArchConfig
from runtime_runner.loading.gguf.agreement import refuse_disagreeing_tensors
from runtime_runner.loading.gguf.arch import PERMUTED_QK, gguf_arch_config
from runtime_runner.loading.gguf.file import GgufFile
from runtime_runner.loading.gguf.format import TensorEntry
from runtime_runner.loading.weight_matrix import Matrix


def unpermuted_rows(rows: int, heads: int) -> torch.Tensor:
    """The order that takes llama.cpp's interleaved rotary rows of `heads` heads back to Hugging
    Face's halves: row (h, i, j) of the result is row (h, j, i) of the file, i the half, j the feature."""
    return torch.arange(rows).view(heads, rows // heads // 2, 2).transpose(1, 2).reshape(-1)


class GgufCheckpoint:
    """The reader over one GGUF file: answers tensors by their Hugging Face names."""

    def __init__(self, file: GgufFile, cfg: ArchConfig) -> None:
        self.file = file
        self.cfg = cfg

    @classmethod
    def open(cls, path: Path) -> GgufCheckpoint:
        """The reader over the GGUF file at `path`: its container, types and architecture checked as
        GgufFile does, its tensors against its metadata as gguf.agreement does."""
        file = GgufFile(path)
        cfg = gguf_arch_config(file)
        refuse_disagreeing_tensors(file, cfg)
        return cls(file, cfg)

    @property
    def model_dir(self) -> Path:
        """The file (named in messages where a directory's reader names its directory)."""
        return self.file.path

    def has(self, name: str) -> bool:
        """Whether the file holds tensor `name` (a Hugging Face name)."""
        return name in self.file.tensors

    def read(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """Tensor `name` dense, as `dtype` on `device` (a block-quantized one de-quantized)."""
        matrix = self.read_matrix(name, shape, dtype, device)
        return matrix.dequantize().to(device=device, dtype=dtype) if isinstance(matrix, QuantizedTensor) else matrix

    def read_matrix(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Matrix:
        """Tensor `name`: dense as `dtype` on `device`, or a block-quantized matrix as a QuantizedTensor
        (on the CPU, the only device its kernels run on); Q and K rows in Hugging Face's order."""
        tensor = self._tensor(name, shape)
        kind = KIND_OF_TYPE.get(tensor.tensor_type)
        matrix: Matrix
        if kind is not None:
            if len(shape) != 2:
                raise CheckpointError(
                    f"GGUF tensor {tensor.name} ({name!r}) is {tensor.tensor_type.name}, a matrix type, but this "
                    f"decoder reads it as shape {list(shape)}; accepted: F32, F16 or BF16 for it"
                )
            blocks = torch.from_numpy(self.file.values(tensor))
            matrix = QuantizedTensor(kind, blocks, None, (shape[0], shape[1]))
        else:
            matrix = self._dense(tensor).to(device=device, dtype=dtype)
        order = self._row_order(name, shape[0])
        if order is None:
            return matrix
        return (
            matrix.rows_at(order) if isinstance(matrix, QuantizedTensor) else matrix.index_select(0, order.to(device))
        )

    def _tensor(self, name: str, shape: tuple[int, ...]) -> TensorEntry:
        tensor = self.file.tensors.get(name)
        if tensor is None:
            raise CheckpointError(
                f"GGUF file {self.file.path.name} lacks tensor {name!r} (expected shape {list(shape)})"
            )
        if tensor.shape != shape:
            raise CheckpointError(
                f"GGUF tensor {tensor.name} ({name!r}) has shape {list(tensor.shape)}; the metadata implies "
                f"{list(shape)}"
            )
        return tensor

    def _dense(self, tensor: TensorEntry) -> torch.Tensor:
        """An F32, F16 or BF16 tensor's values ([N, K] or [K])."""
        values = self.file.values(tensor)
        if tensor.tensor_type == GGMLQuantizationType.BF16:
            return torch.from_numpy(values.view(np.int16)).view(torch.bfloat16)  # the bytes, as bf16 values
        return torch.from_numpy(values)

    def _row_order(self, name: str, rows: int) -> torch.Tensor | None:
        """The un-interleaving order of a Llama Q or K weight or bias; None for every other tensor."""
        if self.file.architecture not in PERMUTED_QK:
            return None
        if ".self_attn.q_proj." in name:
            return unpermuted_rows(rows, self.cfg.num_heads)
        if ".self_attn.k_proj." in name:
            return unpermuted_rows(rows, self.cfg.num_kv_heads)
        return None
