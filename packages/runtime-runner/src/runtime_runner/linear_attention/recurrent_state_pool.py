"""A hybrid model's recurrent-state pool: per linear-attention layer, each slot's conv state and
delta-rule state.

The scheduler hands each running request one slot (`BatchRequest.state_slot`) and takes it back
when the request stops running; the slot holds the state after the request's computed prefix.
Sized once at construction: `mamba_cache_slots()` slots (max_mamba_cache_size, else
max_running_requests), the delta-rule state in exec.mamba.mamba_ssm_dtype, the conv state in the
model's dtype (it holds the layer's own inputs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from config_bags.server import get_exec, mamba_cache_slots
from runtime_runner.errors import BatchError

_SSM_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class LinearLayerState:
    """The state shape of one Gated-DeltaNet layer: its conv over `conv_channels` channels of
    width `conv_width`, and its delta-rule state per head."""

    conv_channels: int
    conv_width: int
    heads: int
    k_dim: int
    v_dim: int


def state_bytes_per_slot(layers: Sequence[LinearLayerState], conv_dtype: torch.dtype, ssm_dtype: torch.dtype) -> int:
    """Bytes one slot takes across the layers."""
    conv = torch.empty((), dtype=conv_dtype).element_size()
    ssm = torch.empty((), dtype=ssm_dtype).element_size()
    return sum(s.conv_channels * (s.conv_width - 1) * conv + s.heads * s.k_dim * s.v_dim * ssm for s in layers)


class RecurrentStatePool:
    """`conv[i]` [slots, conv_channels, conv_width - 1] and `ssm[i]` [slots, heads, k_dim, v_dim]
    of linear layer i (in the order of the model's linear layers)."""

    def __init__(
        self,
        layers: Sequence[LinearLayerState],
        *,
        conv_dtype: torch.dtype,
        device: torch.device,
        num_slots: int | None = None,
    ) -> None:
        """Sized from the bags, or to exactly `num_slots`."""
        if not layers:
            raise ValueError("a recurrent-state pool holds the state of at least one linear-attention layer; got none")
        slots = num_slots if num_slots is not None else mamba_cache_slots()
        if slots < 1:
            raise BatchError(
                f"the recurrent-state pool would hold {slots} slots; accepted: at least 1 "
                "(exec.mamba.max_mamba_cache_size or schedule.max_running_requests)"
            )
        ssm_dtype = _SSM_DTYPES[get_exec().mamba.mamba_ssm_dtype]
        self.layers = tuple(layers)
        self.conv = tuple(
            torch.zeros(slots, s.conv_channels, s.conv_width - 1, dtype=conv_dtype, device=device) for s in layers
        )
        self.ssm = tuple(torch.zeros(slots, s.heads, s.k_dim, s.v_dim, dtype=ssm_dtype, device=device) for s in layers)

    @property
    def num_slots(self) -> int:
        """Slots per layer."""
        return int(self.ssm[0].shape[0])

    @property
    def bytes_per_slot(self) -> int:
        """Bytes one slot takes across the layers."""
        return state_bytes_per_slot(self.layers, self.conv[0].dtype, self.ssm_dtype)

    @property
    def ssm_dtype(self) -> torch.dtype:
        """Element type of the delta-rule states (exec.mamba.mamba_ssm_dtype at construction)."""
        return self.ssm[0].dtype

    def copy_slot(self, slot: int, into: RecurrentStatePool, into_slot: int) -> None:
        """Copy slot `slot`'s state (every layer's) into `into`'s slot `into_slot` (same layer shapes)."""
        for layer in range(len(self.layers)):
            into.conv[layer][into_slot].copy_(self.conv[layer][slot])
            into.ssm[layer][into_slot].copy_(self.ssm[layer][slot])

    def check_slots(self, slots: Sequence[int]) -> None:
        """Refuse a batch whose state slots the pool does not hold or that two requests share
        (before anything is computed)."""
        bad = [s for s in slots if not 0 <= s < self.num_slots]
        if bad:
            raise BatchError(
                f"batch names recurrent-state slots {bad[:8]}; accepted: 0..{self.num_slots - 1}, one per request"
            )
        if len(set(slots)) != len(slots):
            raise BatchError(
                f"two requests of the batch share a recurrent-state slot: {list(slots)[:16]}; accepted: one slot per "
                "request"
            )
