"""The multi-step draft decode container: one decode-half backend per draft step.

A draft runner proposes `speculative_num_steps` tokens per verify, one decode forward per step,
and each step plans on its own backend, so a step's plan never overwrites another's. The forward's
metadata names its step (`draft_step`); the container plans that child. The children carry the
stamps: the container is built on a path that stamps them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attn_backends.backend import AttentionBackend
from attn_backends.metadata import AttentionMetadataView
from attn_backends.native_attention import NativeAttention


class MultiStepDraftBackend(AttentionBackend):
    """One backend per draft step; draft step i of a proposal is a decode forward planned on child i."""

    def __init__(self, steps: Sequence[AttentionBackend]) -> None:
        self.attn_backends: tuple[AttentionBackend, ...] = tuple(steps)
        self._selected: AttentionBackend | None = None

    def stamp(self, effective_name: str) -> None:
        """Refused: the container has no kernel of its own; its children carry the stamps."""
        raise TypeError("a multi-step draft container carries no stamp of its own; stamp its children (stamps_children=True)")

    @property
    def effective_name(self) -> str:
        """The children's stamps, step 0 first."""
        return f"multi_step({', '.join(child.effective_name for child in self.attn_backends)})"

    def child_for(self, draft_step: int) -> AttentionBackend:
        """The backend of draft step `draft_step` (from 0)."""
        if not 0 <= draft_step < len(self.attn_backends):
            raise ValueError(f"draft_step {draft_step} is out of range: this container has {len(self.attn_backends)} steps, "
                             f"0 to {len(self.attn_backends) - 1}")
        return self.attn_backends[draft_step]

    def plan(self, metadata: AttentionMetadataView) -> None:
        """Plan the child of the draft step this decode forward names."""
        if metadata.forward_mode != "decode":
            raise ValueError(f"a multi-step draft container plans decode forwards only, got forward_mode {metadata.forward_mode!r}")
        if metadata.draft_step is None:
            raise ValueError(f"a draft decode names its draft step (0 to {len(self.attn_backends) - 1}) in metadata.draft_step; "
                             "got None")
        self._selected = self.child_for(metadata.draft_step)
        self._selected.plan(metadata)

    def attend(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, *, scale: float) -> torch.Tensor:
        """The planned step's attention for one layer."""
        if self._selected is None:
            raise RuntimeError("attend() was called before plan(); plan each forward first")
        return self._selected.attend(q, k_cache, v_cache, scale=scale)

    def native_attention(self, dtype: torch.dtype, kv_dtype: torch.dtype) -> NativeAttention | None:
        """The planned step's native entry."""
        if self._selected is None:
            raise RuntimeError("native_attention() was called before plan(); plan each forward first")
        return self._selected.native_attention(dtype, kv_dtype)
