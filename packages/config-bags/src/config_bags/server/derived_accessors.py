"""Derived values over the published bags: each `*_of` helper of `derived` read through this
server's accessors at the moment of use, so a derived value follows an override exactly like a
leaf does (and goes through the same role check)."""

from __future__ import annotations

from config_bags.server.accessors import get_exec, get_parallel, get_schedule, get_spec
from config_bags.server.bags.attention_names import LinearAttnBackendName
from config_bags.server.derived import (
    AttentionBackends,
    LinearAttnBackends,
    attention_backends_of,
    chunk_size_of,
    cuda_graph_decode_bs_of,
    deterministic_inference_of,
    linear_attn_backends_of,
    mamba_cache_slots_of,
    mamba_snapshot_slots_of,
    max_prefill_buffer_tokens_of,
    max_speculative_num_draft_tokens_of,
)


def attention_backends() -> AttentionBackends:
    """`attention_backends_of` over the published exec.kernel bag."""
    return attention_backends_of(get_exec().kernel)


def deterministic_inference(device_type: str) -> bool:
    """`deterministic_inference_of` over the published exec bag."""
    return deterministic_inference_of(get_exec(), device_type)


def linear_attn_backends(device_type: str, prefill_default: LinearAttnBackendName | None = None) -> LinearAttnBackends:
    """`linear_attn_backends_of` over the published exec.kernel bag."""
    return linear_attn_backends_of(get_exec().kernel, device_type, prefill_default)


def mamba_cache_slots() -> int:
    """`mamba_cache_slots_of` over the published exec.mamba and schedule bags."""
    return mamba_cache_slots_of(get_exec().mamba, get_schedule())


def mamba_snapshot_slots(bytes_per_slot: int) -> int:
    """`mamba_snapshot_slots_of` over the published exec.mamba bag."""
    return mamba_snapshot_slots_of(get_exec().mamba, bytes_per_slot)


def max_prefill_buffer_tokens() -> int:
    """`max_prefill_buffer_tokens_of` over the published schedule and parallel bags."""
    return max_prefill_buffer_tokens_of(get_schedule(), get_parallel())


def max_speculative_num_draft_tokens() -> int:
    """`max_speculative_num_draft_tokens_of` over the published spec bag."""
    return max_speculative_num_draft_tokens_of(get_spec())


def cuda_graph_decode_bs() -> tuple[int, ...]:
    """`cuda_graph_decode_bs_of` over the published exec.graph bag."""
    return cuda_graph_decode_bs_of(get_exec().graph)


def chunk_size() -> int | None:
    """`chunk_size_of` over the published schedule bag."""
    return chunk_size_of(get_schedule())
