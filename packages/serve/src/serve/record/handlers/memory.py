"""Handlers that size the KV cache from the model's per-token KV bytes."""

from __future__ import annotations

from pathlib import Path

from config_bags import max_total_tokens_of
from runtime_runner import device_of, kv_bytes_per_token, kv_dtype_of, model_dtype_of
from runtime_runner.quantization_support import serves_quantized
from runtime_runner.tensor_parallel_layout import kv_heads_per_rank

from serve.record.errors import ResolutionError
from serve.record.resolution import Resolution


def max_total_tokens(res: Resolution) -> None:
    """KV slots that fit kv_cache_memory_mb, in whole pages (at least one page), at the
    per-token size of the dtype the runner will store K and V in, over the layers that hold K/V
    (a hybrid's full-attention layers; its recurrent-state pool is sized per request, apart) and
    the KV heads one tensor-parallel rank holds: each rank's pool has the budget, and every rank
    of a replica the same slots."""
    args = res.server_args
    bags = res.bags()
    try:
        device = device_of(bags.device)
    except RuntimeError as err:
        raise ResolutionError(f"device={args.device!r} (from {args.origin_of('device') or args.provenance_of('device')}): {err}") from None
    quantized = bags.model.model_path is not None and serves_quantized(bags.model, Path(bags.model.model_path))
    kv_dtype = kv_dtype_of(bags.memory, model_dtype_of(bags.model, res.model.checkpoint_dtype, device, quantized=quantized))
    kv_heads = kv_heads_per_rank(res.model.num_kv_heads, bags.parallel.tp_size)
    per_token = kv_bytes_per_token(res.model.kv_layers, kv_heads, res.model.head_dim, kv_dtype)
    total = max_total_tokens_of(bags.memory, per_token)
    page = args.page_size
    res.declare("max_total_tokens", max_total_tokens=max(page, total // page * page))
