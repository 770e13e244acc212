"""The draft runner's backend: its extend wrapper and its multi-step decode container, one selected per forward.

The selection is `dispatched_half`'s, so `serving_attention_backend(mode, stamp)` names the kernel
each forward runs on: decode goes to the multi-step container (which picks the step's child),
extend, mixed and draft_extend to the extend wrapper. A target verify is the target runner's and an
idle forward has nothing to draft, so both are refused.
"""

from __future__ import annotations

import torch
from config_bags import ForwardMode, dispatched_half

from attn_backends.backend import AttentionBackend
from attn_backends.draft_extend import DraftExtendBackend
from attn_backends.metadata import AttentionMetadataView
from attn_backends.native_attention import NativeAttention
from attn_backends.multi_step_draft import MultiStepDraftBackend

_REFUSED: tuple[ForwardMode, ...] = ("target_verify", "idle")


class DraftRunnerBackend(AttentionBackend):
    """The draft runner's two backends; each forward runs on the one its mode dispatches to."""

    def __init__(self, extend: DraftExtendBackend, multi_step: MultiStepDraftBackend) -> None:
        self.extend = extend
        self.multi_step = multi_step
        self._selected: AttentionBackend | None = None

    def stamp(self, effective_name: str) -> None:
        """Refused: the container has no kernel of its own; the backends it holds carry the stamps."""
        raise TypeError("a draft runner's backend carries no stamp of its own; its extend and multi-step backends carry them")

    @property
    def effective_name(self) -> str:
        """The extend wrapper's stamp and the multi-step container's summary."""
        return f"draft(extend={self.extend.effective_name}, decode={self.multi_step.effective_name})"

    def backend_for(self, forward_mode: ForwardMode) -> AttentionBackend:
        """The backend a draft runner's forward of `forward_mode` runs on."""
        if forward_mode in _REFUSED:
            raise ValueError(f"a draft runner serves extend, mixed, draft_extend and decode forwards, got {forward_mode!r} "
                             "(a target verify runs on the target runner; an idle forward has nothing to draft)")
        return self.multi_step if dispatched_half(forward_mode) == "decode" else self.extend

    def plan(self, metadata: AttentionMetadataView) -> None:
        """Select the backend this forward's mode dispatches to and plan it."""
        self._selected = self.backend_for(metadata.forward_mode)
        self._selected.plan(metadata)

    def attend(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, *, scale: float) -> torch.Tensor:
        """The selected backend's attention for one layer."""
        if self._selected is None:
            raise RuntimeError("attend() was called before plan(); plan each forward first")
        return self._selected.attend(q, k_cache, v_cache, scale=scale)

    def native_attention(self, dtype: torch.dtype, kv_dtype: torch.dtype) -> NativeAttention | None:
        """The selected backend's native entry."""
        if self._selected is None:
            raise RuntimeError("native_attention() was called before plan(); plan each forward first")
        return self._selected.native_attention(dtype, kv_dtype)
