"""Derived values of this server's bags: pure `*_of(bag, ...)` helpers.

Each has an accessor over the published bags in `derived_accessors`; the rules of `Bags` and the
record's own derived members (in `serve`) call the same helpers, so no two tiers disagree.
"""

from __future__ import annotations

from typing import NamedTuple

from config_bags.errors import LeafValueError, UsageError
from config_bags.server.bags import (
    ExecBag,
    GraphBag,
    KernelBag,
    MambaBag,
    MemoryBag,
    ModelBag,
    ParallelBag,
    ScheduleBag,
    SpecBag,
)
from config_bags.server.bags.attention_names import (
    BATCH_INVARIANT_KERNELS,
    AttentionBackendName,
    AttentionHalf,
    LinearAttnBackendName,
)
from config_bags.server.bags.exec import QuantizedActivations


class AttentionBackends(NamedTuple):
    """The attention backend of each half, with the base-field fallback applied."""

    prefill: AttentionBackendName
    decode: AttentionBackendName


class LinearAttnBackends(NamedTuple):
    """The linear-attention kernels of each phase; verify runs with the prefill kernel."""

    decode: LinearAttnBackendName
    prefill: LinearAttnBackendName
    verify: LinearAttnBackendName


def attention_leaf_of(kernel: KernelBag, half: AttentionHalf) -> tuple[str, AttentionBackendName]:
    """(the leaf that names `half`'s backend, its value): the split field when set, else the base
    field (default auto, which the attention factory resolves per host and per half)."""
    split = kernel.prefill_attention_backend if half == "prefill" else kernel.decode_attention_backend
    return (
        (f"{half}_attention_backend", split) if split is not None else ("attention_backend", kernel.attention_backend)
    )


def attention_backends_of(kernel: KernelBag) -> AttentionBackends:
    """(prefill, decode) as configured: `attention_leaf_of` each half."""
    return AttentionBackends(
        prefill=attention_leaf_of(kernel, "prefill")[1], decode=attention_leaf_of(kernel, "decode")[1]
    )


# The device types this build has batch-invariant kernels for: attn-backends' cpu_paged attention
# and runtime-runner's invariant linear (docs/plan.md, "Deterministic inference").
DETERMINISTIC_DEVICE_TYPES = ("cpu",)


def deterministic_inference_of(exec: ExecBag, device_type: str) -> bool:
    """Whether a runner on a `device_type` host runs batch-invariant kernels. The leaf when set;
    unset, on exactly where nothing else configured stands against it: a device this build has
    such kernels for (DETERMINISTIC_DEVICE_TYPES), each attention half `auto` or a batch-invariant
    kernel (BATCH_INVARIANT_KERNELS), and no compiled decode step (its fused graph rounds
    otherwise than a batch does)."""
    chosen = exec.kernel.enable_deterministic_inference
    if chosen is not None:
        return chosen
    halves = attention_backends_of(exec.kernel)
    return (
        device_type in DETERMINISTIC_DEVICE_TYPES
        and not exec.graph.enable_torch_compile
        and all(name == "auto" or name in BATCH_INVARIANT_KERNELS for name in halves)
    )


def quantized_activations_of(exec: ExecBag, reads_gguf: bool, integer_kernels: bool) -> QuantizedActivations:
    """How quantized matrices read their rows: the leaf when set; unset, int8 where a GGUF file's
    matrices are served (`reads_gguf`) on a CPU that has the integer kernels (`integer_kernels`:
    AVX2), float32 elsewhere (a dense or per-channel int8 checkpoint has no GGUF matrix to read)."""
    chosen = exec.kernel.quantized_activations
    if chosen is not None:
        return chosen
    return "int8" if reads_gguf and integer_kernels else "float32"


def device_linear_attn_backend_of(device_type: str) -> LinearAttnBackendName:
    """The linear-attention kernels a `device_type` device runs where the operator named none:
    cpu_fused on a CPU, triton elsewhere (CUDA)."""
    return "cpu_fused" if device_type == "cpu" else "triton"


def linear_attn_backends_of(
    kernel: KernelBag, device_type: str, prefill_default: LinearAttnBackendName | None = None
) -> LinearAttnBackends:
    """The linear-attention kernels a runner on a `device_type` device runs, per phase. An
    operator's explicit split field wins over `prefill_default` (a per-runner default the caller
    stamps on its runner, never records), which wins over the base field; the device's kernels
    (`device_linear_attn_backend_of`) stand in for an unset base field. The device type is asked
    for, not assumed: without it an unset base has no true answer (this once answered triton on a
    CPU, where every runner ran cpu_fused)."""
    base = kernel.linear_attn_backend or device_linear_attn_backend_of(device_type)
    prefill = kernel.linear_attn_prefill_backend or prefill_default or base
    return LinearAttnBackends(decode=kernel.linear_attn_decode_backend or base, prefill=prefill, verify=prefill)


def mamba_cache_slots_of(mamba: MambaBag, schedule: ScheduleBag) -> int:
    """Recurrent-state slots of a hybrid model's state pool: max_mamba_cache_size, else one per
    request that may run at once (max_running_requests). A running request holds one slot; a
    verify's per-token states live outside the pool, so no headroom is needed."""
    return mamba.max_mamba_cache_size if mamba.max_mamba_cache_size is not None else schedule.max_running_requests


def mamba_snapshot_slots_of(mamba: MambaBag, bytes_per_slot: int) -> int:
    """Recurrent-state snapshots a hybrid model's prefix cache keeps: mamba_snapshot_memory_mb over
    the bytes one snapshot takes (one slot of the state pool); 0 keeps none."""
    if bytes_per_slot < 1:
        raise UsageError(f"bytes_per_slot={bytes_per_slot} is not accepted; accepted: an int >= 1")
    return int(mamba.mamba_snapshot_memory_mb * 1024 * 1024) // bytes_per_slot


def snapshot_grid_refusal(mamba: MambaBag, schedule: ScheduleBag) -> str | None:
    """Why the snapshot interval is off the page and chunk grid (None when it is on it): it is a
    multiple of the page size, and the prefill chunk (when chunking) is a multiple of it or it a
    multiple of the chunk, so that chunks end on snapshot boundaries."""
    interval, page = mamba.mamba_snapshot_interval, schedule.page_size
    if interval % page:
        return f"mamba_snapshot_interval % page_size = {interval} % {page} = {interval % page}, must be 0"
    chunk = chunk_size_of(schedule)
    if chunk is not None and chunk % interval and interval % chunk:
        return (
            f"chunk % mamba_snapshot_interval = {chunk} % {interval} = {chunk % interval} and "
            f"mamba_snapshot_interval % chunk = {interval % chunk}: one of them must be 0 (chunk: chunked_prefill_size "
            "in whole pages)"
        )
    return None


def max_prefill_buffer_tokens_of(schedule: ScheduleBag, parallel: ParallelBag) -> int:
    """Prompt tokens the prefill buffers must hold: one step's prefill budget (the larger of
    max_prefill_tokens and the chunk size when chunking) for each pipeline stage in flight."""
    per_step = schedule.max_prefill_tokens
    if schedule.chunked_prefill_size != -1:
        per_step = max(per_step, schedule.chunked_prefill_size)
    return per_step * parallel.pp_size


def max_speculative_num_draft_tokens_of(spec: SpecBag) -> int:
    """The most tokens one verify pass adds per request (each gets a KV slot): the last accepted
    token and the drafts after it, so a request proposes one fewer. 0 without speculation; the
    configured count for ngram; for a draft model, capped by what its steps can propose."""
    if spec.speculative_algorithm is None:
        return 0
    if spec.speculative_algorithm == "ngram":
        return spec.speculative_num_draft_tokens
    return min(spec.speculative_num_draft_tokens, spec.speculative_num_steps * spec.speculative_eagle_topk + 1)


def cuda_graph_decode_bs_of(graph: GraphBag) -> tuple[int, ...]:
    """Decode batch sizes to capture: the explicit list, else 1, 2, 4, 8 then every 8 up to the max."""
    if graph.cuda_graph_decode_bs is not None:
        return graph.cuda_graph_decode_bs
    sizes = [bs for bs in (1, 2, 4) if bs <= graph.cuda_graph_max_bs]
    sizes += list(range(8, graph.cuda_graph_max_bs + 1, 8))
    if sizes[-1] != graph.cuda_graph_max_bs:
        sizes.append(graph.cuda_graph_max_bs)
    return tuple(sizes)


def max_total_tokens_of(memory: MemoryBag, kv_bytes_per_token: int) -> int:
    """KV-cache slots: max_total_tokens when set, else kv_cache_memory_mb over the per-token size."""
    if kv_bytes_per_token < 1:
        raise UsageError(f"kv_bytes_per_token = {kv_bytes_per_token} is not accepted; accepted: an int >= 1")
    if memory.max_total_tokens is not None:
        return memory.max_total_tokens
    return max(1, memory.kv_cache_memory_mb * 1024 * 1024 // kv_bytes_per_token)


def context_length_refusal(model: ModelBag, model_max_length: int) -> str | None:
    """Why the configured context length cannot be served by a model of `model_max_length`
    positions (it exceeds them), or None when it can."""
    length = model.context_length
    if length is not None and length > model_max_length:
        return (
            f"context_length = {length} requires context_length <= the model's maximum, "
            f"got maximum = {model_max_length} tokens"
        )
    return None


def context_length_of(model: ModelBag, model_max_length: int) -> int:
    """The served context length: the configured one, which may not exceed the model's own
    maximum (LeafValueError), else the model's maximum."""
    refusal = context_length_refusal(model, model_max_length)
    if refusal is not None:
        raise LeafValueError(f"{refusal}; accepted: 1 to {model_max_length}, or unset")
    return model_max_length if model.context_length is None else model.context_length


def chunk_size_of(schedule: ScheduleBag) -> int | None:
    """The prefill chunk in tokens, truncated down to a whole number of pages (at least one
    page); None when chunking is disabled."""
    if schedule.chunked_prefill_size == -1:
        return None
    page = schedule.page_size
    return max(page, schedule.chunked_prefill_size // page * page)
