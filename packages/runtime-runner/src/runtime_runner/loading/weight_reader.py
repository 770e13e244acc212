"""What the loader asks of a checkpoint, whatever its format: a Hugging Face directory
(runtime_runner.loading.checkpoint) or a GGUF file (runtime_runner.loading.gguf.checkpoint)."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

import torch

from runtime_runner.loading.weight_matrix import Matrix


class WeightReader(Protocol):
    """Named tensors, each checked against the shape the model expects (Hugging Face names)."""

    @property
    def model_dir(self) -> Path:
        """The checkpoint (a directory, or a GGUF file), as messages name it."""
        ...

    def has(self, name: str) -> bool:
        """Whether the checkpoint holds tensor `name`."""
        ...

    def read(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """Tensor `name`, dense, as `dtype` on `device`."""
        ...

    def read_matrix(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Matrix:
        """Weight matrix `name`: dense as `dtype` on `device`, or kept quantized where the checkpoint
        (or the reader) holds it so."""
        ...
