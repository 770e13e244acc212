"""The hybrid attention container: a prefill-half backend and a decode-half backend, one selected per forward.

The runner builds one when the two halves resolve to different kernels (`auto` on a CPU does).
`plan` selects by the forward's mode exactly as `config_bags.dispatched_half` answers (decode and
idle to the decode half, a target verify by `speculative_attention_mode`, everything else to the
prefill half), so `serving_attention_backend` can mirror it; the selected child plans and
attends. The children carry the stamps: the container is built on a path that stamps them.
"""

from __future__ import annotations

import torch
from config_bags import AttentionHalf, dispatched_half

from attn_backends.backend import AttentionBackend
from attn_backends.metadata import AttentionMetadataView
from attn_backends.native_attention import NativeAttention


class HybridAttentionBackend(AttentionBackend):
    """Two backends, one per half; each forward runs on the one its mode dispatches to."""

    def __init__(self, prefill: AttentionBackend, decode: AttentionBackend) -> None:
        self.attn_backends: tuple[AttentionBackend, AttentionBackend] = (prefill, decode)
        self._selected: AttentionBackend | None = None

    def stamp(self, effective_name: str) -> None:
        """Refused: the container has no kernel of its own; its children carry the stamps."""
        raise TypeError("a hybrid attention container carries no stamp of its own; stamp its children (stamps_children=True)")

    @property
    def effective_name(self) -> str:
        """The children's stamps, prefill half first."""
        prefill, decode = self.attn_backends
        return f"hybrid(prefill={prefill.effective_name}, decode={decode.effective_name})"

    def child_for(self, half: AttentionHalf) -> AttentionBackend:
        """The backend of `half`."""
        return self.attn_backends[0] if half == "prefill" else self.attn_backends[1]

    def plan(self, metadata: AttentionMetadataView) -> None:
        """Select the child this forward's mode dispatches to and plan it."""
        self._selected = self.child_for(dispatched_half(metadata.forward_mode))
        self._selected.plan(metadata)

    def attend(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, *, scale: float) -> torch.Tensor:
        """The selected child's attention for one layer."""
        if self._selected is None:
            raise RuntimeError("attend() was called before plan(); plan each forward first")
        return self._selected.attend(q, k_cache, v_cache, scale=scale)

    def native_attention(self, dtype: torch.dtype, kv_dtype: torch.dtype) -> NativeAttention | None:
        """The selected child's native entry."""
        if self._selected is None:
            raise RuntimeError("native_attention() was called before plan(); plan each forward first")
        return self._selected.native_attention(dtype, kv_dtype)
