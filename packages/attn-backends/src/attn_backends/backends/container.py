"""A backend that holds others and runs each forward on one of them; it has no kernel, so no stamp, of its own.

The hybrid container (a backend per half), the draft runner's backend (extend or multi-step) and
the multi-step draft container (a backend per step) differ only in how they choose: each answers
`select_child(metadata)`, and this base plans the chosen child and sends the forward's layers to it.
Their children carry the stamps; the container refuses one, with the reason its class gives.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

import torch

from attn_backends.backend import AttentionBackend
from attn_backends.kernels.native_attention import NativeAttention
from attn_backends.metadata import AttentionMetadataView


class ContainerBackend(AttentionBackend):
    """Plans the child `select_child` answers for each forward; attends and answers the native entry through it."""

    # Why the container cannot be stamped, and what carries the stamps instead: stamp's TypeError.
    stamp_refusal: ClassVar[str]
    _selected: AttentionBackend | None = None

    def stamp(self, effective_name: str) -> None:
        """Refused: the container has no kernel of its own; the backends it holds carry the stamps."""
        raise TypeError(self.stamp_refusal)

    @abstractmethod
    def select_child(self, metadata: AttentionMetadataView) -> AttentionBackend:
        """The child this forward runs on; a ValueError for a forward the container does not serve."""

    def plan(self, metadata: AttentionMetadataView) -> None:
        """Select the child of this forward and plan it."""
        self._selected = self.select_child(metadata)
        self._selected.plan(metadata)

    def attend(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, *, scale: float) -> torch.Tensor:
        """The selected child's attention for one layer."""
        return self._planned("attend").attend(q, k_cache, v_cache, scale=scale)

    def native_attention(self, dtype: torch.dtype, kv_dtype: torch.dtype) -> NativeAttention | None:
        """The selected child's native entry."""
        return self._planned("native_attention").native_attention(dtype, kv_dtype)

    def _planned(self, call: str) -> AttentionBackend:
        if self._selected is None:
            raise RuntimeError(f"{call}() was called before plan(); plan each forward first")
        return self._selected
