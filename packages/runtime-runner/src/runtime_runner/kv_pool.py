"""The paged KV cache: per-layer K and V tensors of slots, grouped in pages of `page_size`.

Sized once from the bags at construction (memory.max_total_tokens, or kv_cache_memory_mb over the
per-token size). The page size is read from the bags whenever it is needed, never kept.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from config_bags.server import get_memory, get_schedule, max_total_tokens_of
from runtime_runner.errors import BatchError


def kv_bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int, dtype: torch.dtype) -> int:
    """Bytes one token's K and V take across all layers."""
    return num_layers * 2 * num_kv_heads * head_dim * torch.empty((), dtype=dtype).element_size()


class KVPool:
    """K and V of every layer: `k[layer]`, `v[layer]` of shape [kv_heads, slots, head_dim].

    Heads lead so that a gather of any slots comes out as one contiguous [kv_heads, tokens, head_dim]
    block per head, which batched matmuls take without a layout copy.
    """

    def __init__(
        self,
        *,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device,
        num_slots: int | None = None,
    ) -> None:
        """Sized from the bags, or to exactly `num_slots` (a draft runner's pool mirrors its
        target's slots, so the scheduler's page tables index both)."""
        page_size = get_schedule().page_size
        wanted = (
            num_slots
            if num_slots is not None
            else max_total_tokens_of(get_memory(), kv_bytes_per_token(num_layers, num_kv_heads, head_dim, dtype))
        )
        slots = wanted // page_size * page_size
        if slots == 0:
            raise BatchError(
                f"the KV pool would hold {wanted} token slots, less than one page of {page_size}; "
                "accepted: memory.max_total_tokens (or kv_cache_memory_mb) of at least one page"
            )
        shape = (num_kv_heads, slots, head_dim)
        self.k = tuple(torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers))
        self.v = tuple(torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers))

    @property
    def num_slots(self) -> int:
        """Token slots per layer."""
        return int(self.k[0].shape[1])

    @property
    def num_pages(self) -> int:
        """Pages of the published page size."""
        return self.num_slots // get_schedule().page_size

    @property
    def dtype(self) -> torch.dtype:
        """Element type of the cache."""
        return self.k[0].dtype

    def check_slots(self, slots: Sequence[int]) -> None:
        """Refuse slot indices the pool does not hold (before anything is written)."""
        if len(slots) > self.num_slots:
            raise BatchError(f"batch writes {len(slots)} tokens but the KV pool holds only {self.num_slots} slots")
        if slots and (min(slots) < 0 or max(slots) >= self.num_slots):
            raise BatchError(f"batch writes KV slots {min(slots)}..{max(slots)}; accepted: 0..{self.num_slots - 1}")

    def write(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store the new tokens' K and V [tokens, kv_heads, head_dim] of `layer` at `slots` (cast to the cache
        dtype)."""
        self.k[layer].index_copy_(1, slots, k.transpose(0, 1).to(self.dtype))
        self.v[layer].index_copy_(1, slots, v.transpose(0, 1).to(self.dtype))
