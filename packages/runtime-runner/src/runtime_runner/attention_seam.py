"""What the runner needs from an attention backend, declared as protocols, and the metadata it hands one.

`serve` (and the cross-package tests) wire `attn_backends.build_attention_backend` in as the factory;
the runner never imports attn_backends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch


@dataclass(frozen=True)
class AttentionMetadata:
    """One forward's attention shape (fits attn_backends.AttentionMetadataView)."""

    page_size: int
    page_table: torch.Tensor  # [requests, pages] int64, padded with page 0
    prefix_lens: torch.Tensor
    extend_lens: torch.Tensor
    seq_lens: torch.Tensor
    num_tokens: int
    max_extend_len: int
    max_seq_len: int


class AttentionBackend(Protocol):
    """A backend as the runner drives it: stamped once, planned per forward, attended per layer."""

    def stamp(self, effective_name: str) -> None: ...

    @property
    def effective_name(self) -> str: ...

    def plan(self, metadata: AttentionMetadata) -> None: ...

    def attend(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, *, scale: float) -> torch.Tensor: ...


class AttentionBackendFactory(Protocol):
    """Builds the backend registered under a name; answers (effective_name, backend)."""

    def __call__(self, name: str, /) -> tuple[str, AttentionBackend]: ...
