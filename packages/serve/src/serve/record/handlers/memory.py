"""Handlers that size the KV cache from the model's per-token KV bytes."""

from __future__ import annotations

from pathlib import Path

import torch

from attn_backends import attention_choice, kv_dtype_refusal
from config_bags.server import AttentionHalf, attention_leaf_of, deterministic_inference_of, max_total_tokens_of
from runtime_runner import device_of, kv_bytes_per_token, kv_dtype_of, model_dtype_of
from runtime_runner.loading.quantization_support import serves_quantized
from runtime_runner.parallel.rank_layout import kv_heads_per_rank
from serve.record.errors import ResolutionError
from serve.record.resolution import Resolution
from serve.visible_device import visible_device_type


def kv_cache_dtype_attended(res: Resolution) -> None:
    """A KV cache in a dtype other than the compute dtype (kv_cache_dtype) only where every
    attention kernel the runners build reads it: each half of the pair, and the draft runner's own
    backend when one is named (cpu_paged reads a bf16 cache under fp32 compute)."""
    bags = res.bags()
    device_type = visible_device_type(bags)
    if device_type is None:
        return
    dtype = _compute_dtype(res, torch.device(device_type))  # the compute dtype depends on the device's type alone
    kv_dtype = kv_dtype_of(bags.memory, dtype)
    if kv_dtype == dtype:
        return
    batch_invariant = deterministic_inference_of(bags.exec, device_type)
    halves: tuple[AttentionHalf, ...] = ("prefill", "decode")
    named = [(*attention_leaf_of(bags.exec.kernel, half), half) for half in halves]
    draft = bags.spec.speculative_draft_attention_backend
    if draft is not None:
        named += [("speculative_draft_attention_backend", draft, half) for half in halves]
    for leaf, name, half in named:
        choice = attention_choice(name, half=half, device_type=device_type, batch_invariant=batch_invariant)
        reason = kv_dtype_refusal(choice.kernel, dtype, kv_dtype)
        if reason is not None:
            raise ResolutionError(
                f"kv_cache_dtype={bags.memory.kv_cache_dtype!r} (from {res.origin('kv_cache_dtype')}) "
                f"with {leaf} = {name}{choice.builds}: {reason}; accepted: kv_cache_dtype auto, "
                "or a cache every attention backend reads (only cpu_paged reads a narrower one)"
            )


def _compute_dtype(res: Resolution, device: torch.device) -> torch.dtype:
    """The dtype the runner computes in (model.dtype resolved for the checkpoint and the device)."""
    bags = res.bags()
    quantized = bags.model.model_path is not None and serves_quantized(bags.model, Path(bags.model.model_path))
    return model_dtype_of(bags.model, res.model.checkpoint_dtype, device, quantized=quantized)


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
        raise ResolutionError(
            f"device={args.device!r} (from {args.origin_of('device') or args.provenance_of('device')}): {err}"
        ) from None
    kv_dtype = kv_dtype_of(bags.memory, _compute_dtype(res, device))
    kv_heads = kv_heads_per_rank(res.model.num_kv_heads, bags.parallel.tp_size)
    per_token = kv_bytes_per_token(res.model.kv_layers, kv_heads, res.model.head_dim, kv_dtype)
    total = max_total_tokens_of(bags.memory, per_token)
    page = args.page_size
    res.declare("max_total_tokens", max_total_tokens=max(page, total // page * page))
