"""The attention and linear-attention backend names an operator may ask for."""

from __future__ import annotations

from typing import Literal

AttentionBackendName = Literal["torch_native", "triton", "flashinfer"]
LinearAttnBackendName = Literal["torch_native", "triton", "flashinfer"]
