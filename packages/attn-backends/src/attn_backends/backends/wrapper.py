"""A backend that wraps another to add a side job; it carries the wrapped backend's stamp.

A speculative worker's draft-extend wrapper, for one, plans and attends through the backend it
wraps and does its own work around the calls. It is built from an already stamped backend and
copies that stamp at construction, so whoever asks which kernel the forward dispatches to gets the
wrapped kernel's name, and a wrapper of an unstamped backend raises at once.
"""

from __future__ import annotations

import torch

from attn_backends.backend import AttentionBackend
from attn_backends.kernels.native_attention import NativeAttention
from attn_backends.metadata import AttentionMetadataView


class WrapperBackend(AttentionBackend):
    """Delegates plan and attend to `wrapped`; subclasses add their side job around them."""

    def __init__(self, wrapped: AttentionBackend) -> None:
        self.wrapped = wrapped
        self.stamp(wrapped.effective_name)

    def plan(self, metadata: AttentionMetadataView) -> None:
        """The wrapped backend's plan."""
        self.wrapped.plan(metadata)

    def attend(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, *, scale: float) -> torch.Tensor:
        """The wrapped backend's attention."""
        return self.wrapped.attend(q, k_cache, v_cache, scale=scale)

    def native_attention(self, dtype: torch.dtype, kv_dtype: torch.dtype) -> NativeAttention | None:
        """The wrapped backend's native entry (its side job runs around plan, which the native caller still calls)."""
        return self.wrapped.native_attention(dtype, kv_dtype)
