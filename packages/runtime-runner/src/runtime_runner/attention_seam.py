"""What the runner needs from attention, declared as protocols, and the metadata it hands a backend.

`serve` (and the cross-package tests) wire `attn_backends.build_attention_pair` in as the pair
factory; the runner never imports attn_backends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch

from runtime_runner.batch import ForwardMode


class AttentionStamp(Protocol):
    """What a pair factory answers about the pair it built: each half's effective kernel, and
    whether it is a draft runner's own override (attn_backends.AttentionStamp fits)."""

    @property
    def prefill(self) -> str: ...
    @property
    def decode(self) -> str: ...
    @property
    def is_draft_override(self) -> bool: ...


@dataclass(frozen=True)
class AttentionMetadata:
    """One forward's attention shape (fits attn_backends.AttentionMetadataView)."""

    forward_mode: ForwardMode
    page_size: int
    page_table: torch.Tensor  # [requests, pages] int64, padded with page 0
    prefix_lens: torch.Tensor
    extend_lens: torch.Tensor
    seq_lens: torch.Tensor
    num_tokens: int
    max_extend_len: int
    draft_step: int | None = None  # which step of a proposal a draft runner's decode is (else None)


class NativeAttentionView(Protocol):
    """A planned forward's attention as C++ calls it (attn_backends.NativeAttention): the entry's
    address and its plan's; the ABI is attn_backends/kernels/native_attention.py's."""

    @property
    def entry(self) -> int: ...

    @property
    def plan(self) -> int: ...


class AttentionBackend(Protocol):
    """A backend as the runner drives it: planned per forward, attended per layer (the factory
    stamps it; the runner asks the stamp, never the backend, which kernel runs)."""

    def plan(self, metadata: AttentionMetadata) -> None: ...

    def attend(
        self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, *, scale: float
    ) -> torch.Tensor: ...

    def native_attention(self, dtype: torch.dtype, kv_dtype: torch.dtype) -> NativeAttentionView | None:
        """The planned forward's attention as a C entry the native step calls per layer, or None."""
        ...


class AttentionPairFactory(Protocol):
    """Builds the configured (prefill, decode) pair for a device type, batch-invariant when asked
    (refused where it cannot be); answers the runner's stamp (each half's effective kernel) and
    the backend to drive, stamped."""

    def __call__(
        self,
        prefill: str,
        decode: str,
        /,
        *,
        device_type: str,
        is_draft_override: bool = False,
        batch_invariant: bool = False,
    ) -> tuple[AttentionStamp, AttentionBackend]: ...
