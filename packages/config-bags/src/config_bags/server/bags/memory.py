"""memory: how large the KV cache is and how it is stored."""

from __future__ import annotations

from typing import Annotated, Literal

from config_bags.bag import Bag
from config_bags.constraints import AboveOneFloat, PositiveInt
from config_bags.leaf import leaf

KvCacheDtype = Literal["auto", "float32", "bfloat16", "float16"]


class MemoryBag(Bag, frozen=True, kw_only=True):
    """KV-cache sizing and storage."""

    max_total_tokens: Annotated[
        PositiveInt | None,
        leaf("KV-cache token slots in each replica's pool (unset: sized from kv_cache_memory_mb).", hot=False),
    ] = None
    kv_cache_memory_mb: Annotated[
        PositiveInt, leaf("Memory for the KV cache of each rank when max_total_tokens is unset, in MiB.", hot=False)
    ] = 1024
    kv_cache_dtype: Annotated[
        KvCacheDtype, leaf("Element type of the KV cache (auto: the model's dtype).", hot=False)
    ] = "auto"
    enable_hierarchical_cache: Annotated[bool, leaf("Back the device KV cache with a host-memory tier.", hot=False)] = (
        False
    )
    hicache_ratio: Annotated[AboveOneFloat, leaf("Host KV tier size as a multiple of the device pool.", hot=False)] = (
        2.0
    )
