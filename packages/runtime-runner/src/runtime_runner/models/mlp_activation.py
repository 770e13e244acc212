"""The gated MLP's activation: silu(gate) * up."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from runtime_runner.kernels import cpu_fused_ops


def silu_and_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up of gate_up [rows, 2 * inter] = [gate | up] -> [rows, inter]."""
    if cpu_fused_ops.handles(gate_up):
        return cpu_fused_ops.silu_mul(gate_up)
    gate, up = gate_up.chunk(2, -1)
    return F.silu(gate) * up
