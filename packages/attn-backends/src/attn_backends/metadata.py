"""What an attention backend reads about one forward, declared as a protocol.

The runner builds its own metadata object; it fits here structurally (the two packages never
import each other). Tensors live on the compute device; the host ints spare a device sync.
"""

from __future__ import annotations

from typing import Protocol

import torch

from attn_backends.dispatch import ForwardMode


class AttentionMetadataView(Protocol):
    """The shape of one forward's attention: per request, its cached prefix and new tokens."""

    @property
    def forward_mode(self) -> ForwardMode: ...  # what the forward computes (a hybrid container selects its half by it)
    @property
    def page_size(self) -> int: ...  # tokens per KV page
    @property
    def page_table(self) -> torch.Tensor: ...  # [requests, pages] int64, padded with page 0
    @property
    def prefix_lens(self) -> torch.Tensor: ...  # [requests] int64: tokens already in the pool
    @property
    def extend_lens(self) -> torch.Tensor: ...  # [requests] int64: new tokens this forward
    @property
    def seq_lens(self) -> torch.Tensor: ...  # [requests] int64: prefix_lens + extend_lens
    @property
    def num_tokens(self) -> int: ...  # sum of extend_lens
    @property
    def max_extend_len(self) -> int: ...
    @property
    def draft_step(
        self,
    ) -> int | None: ...  # None except on a draft runner's proposal decode: which step (from 0) it is
