"""Handlers that size the KV cache from the model's per-token KV bytes."""

from __future__ import annotations

from config_bags import max_total_tokens_of

from serve.record.resolution import Resolution


def max_total_tokens(res: Resolution) -> None:
    """KV slots that fit kv_cache_memory_mb, in whole pages (at least one page)."""
    args = res.server_args
    kv_dtype = args.kv_cache_dtype if args.kv_cache_dtype != "auto" else args.dtype
    per_token = res.model.kv_bytes_per_token(kv_dtype, args.tp_size)
    total = max_total_tokens_of(args.bags().memory, per_token)
    page = args.page_size
    res.declare("max_total_tokens", max_total_tokens=max(page, total // page * page))
