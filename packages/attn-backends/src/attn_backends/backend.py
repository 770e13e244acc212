"""The base of every attention backend: the plan/attend contract and the effective-name stamp."""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch

from attn_backends.dispatch import KERNEL_NAMES
from attn_backends.kernels.native_attention import NativeAttention
from attn_backends.metadata import AttentionMetadataView


class UnstampedBackendError(RuntimeError):
    """A backend was asked for its effective name but was never stamped by the runner that built it."""


class AttentionBackend(ABC):
    """Attention over a paged KV cache.

    `plan(metadata)` is called once per forward; `attend(...)` once per layer, after the runner
    wrote the layer's new K/V into the pool. The effective name is stamped by whoever built the
    backend through the factory; a backend constructed directly has none and says so when asked.
    """

    _effective_name: str | None = None

    def stamp(self, effective_name: str) -> None:
        """Record the kernel name this backend was built under (once); a name that is no kernel (an
        alias, `auto`, a misspelling) is refused, so a stamp always says what runs."""
        if effective_name not in KERNEL_NAMES:
            raise ValueError(
                f"cannot stamp {type(self).__name__} {effective_name!r}: a stamp is a kernel name, "
                f"one of {', '.join(KERNEL_NAMES)}"
            )
        if self._effective_name is not None and self._effective_name != effective_name:
            raise ValueError(f"backend already stamped {self._effective_name!r}; cannot restamp it {effective_name!r}")
        self._effective_name = effective_name

    @property
    def effective_name(self) -> str:
        """The stamped name; raises UnstampedBackendError when the backend was built outside the factory path."""
        if self._effective_name is None:
            raise UnstampedBackendError(
                f"{type(self).__name__} has no effective-name stamp: it was built outside the stamping path; "
                "build it through the factory and stamp it with the name the factory answers"
            )
        return self._effective_name

    @abstractmethod
    def plan(self, metadata: AttentionMetadataView) -> None:
        """Prepare the gather indices and masks of one forward."""

    @abstractmethod
    def attend(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, *, scale: float) -> torch.Tensor:
        """Attention of the planned forward for one layer: q [tokens, heads, head_dim] against the
        layer's pool k_cache/v_cache [kv_heads, slots, head_dim]; answers [tokens, heads, head_dim]."""

    def native_attention(self, dtype: torch.dtype, kv_dtype: torch.dtype) -> NativeAttention | None:
        """The planned forward's attention as a C entry a native caller runs per layer
        (native_attention.py), or None: this backend attends from Python only."""
        return None
