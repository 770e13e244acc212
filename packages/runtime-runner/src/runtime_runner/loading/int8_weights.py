"""`quantization = int8`: a dense checkpoint's weight matrices quantized at load, per output
channel (runtime_runner.kernels.quantized_tensor.int8_per_channel_of), and held only so.

Every matrix the loader reads as one is quantized: the projections, the LM head, and the token
embedding too. A tied model's LM head is its embedding, so a dense embedding would mean a second,
int8, copy of the table for the head; quantized, the one table serves both (the lookup de-quantizes
a row exactly, QuantizedEmbedding). The extra error of an int8 embedding measured on the default
model is within the tolerance of its LM head's own (tests/test_int8_quantization.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from runtime_runner.kernels.quantized_tensor import QuantizedTensor, int8_per_channel_of
from runtime_runner.loading.weight_reader import WeightReader


@dataclass(frozen=True)
class Int8Weights:
    """A dense checkpoint's reader whose matrices come quantized to int8 (a WeightReader)."""

    reader: WeightReader

    @property
    def model_dir(self) -> Path:
        """The checkpoint read."""
        return self.reader.model_dir

    def has(self, name: str) -> bool:
        """Whether the checkpoint holds tensor `name`."""
        return self.reader.has(name)

    def read(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A tensor that stays dense (a norm, a bias), as the checkpoint holds it."""
        return self.reader.read(name, shape, dtype, device)

    def read_matrix(
        self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device
    ) -> QuantizedTensor:
        """Matrix `name` quantized from the checkpoint's own values (read in fp32, so an fp32
        checkpoint is not rounded to the activation dtype first)."""
        return int8_per_channel_of(self.reader.read(name, shape, torch.float32, device))
