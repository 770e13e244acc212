"""`ServerArgs`: the flat launch record, one typed attribute per leaf of the bag schemas.

The record exists only in `serve`: it is parsed from the operator's input, resolved by named
handlers, sealed, and projected into `Bags`. Every leaf carries its provenance. Its derived
members call the same `*_of` helpers as the bag accessors, so the two tiers cannot disagree.
"""

from __future__ import annotations

from enum import Enum
from typing import Any, Literal

from config_bags import checked_value, leaf_spec, leaf_specs
from config_bags.server import (
    AttentionBackends,
    Bags,
    LinearAttnBackends,
    attention_backends_of,
    chunk_size_of,
    cuda_graph_decode_bs_of,
    linear_attn_backends_of,
    mamba_cache_slots_of,
    max_prefill_buffer_tokens_of,
    max_speculative_num_draft_tokens_of,
)
from serve.record.errors import SealedRecordError
from serve.record.projection import bags_of

LEAF_NAMES: tuple[str, ...] = tuple(leaf_specs(Bags))


class RecordState(Enum):
    """OPEN takes assignments; RESOLVING takes only handler declarations; SEALED takes nothing."""

    OPEN = "open"
    RESOLVING = "resolving"
    SEALED = "sealed"


class ServerArgs:
    """The launch record. `ServerArgs(page_size=16)` sets leaves as an operator would (provenance
    `cli`); unnamed leaves keep their defaults. Assignment checks the value against the leaf and
    is refused once `resolve()` began with this record's copy, and on the sealed result."""

    __slots__ = ("_state", "_provenance", "_origin", *LEAF_NAMES)

    _state: RecordState
    _provenance: dict[str, str]
    _origin: dict[str, str]

    # BEGIN generated leaves: `uv run python -m serve.record.codegen` rewrites this block
    # schedule
    page_size: int
    chunked_prefill_size: int
    max_running_requests: int
    max_prefill_tokens: int
    schedule_policy: Literal["fcfs", "lpm"]
    max_queued_requests: int | None
    # memory
    max_total_tokens: int | None
    kv_cache_memory_mb: int
    kv_cache_dtype: Literal["auto", "float32", "bfloat16", "float16"]
    enable_hierarchical_cache: bool
    hicache_ratio: float
    # model
    model_path: str | None
    tokenizer_path: str | None
    served_model_name: str | None
    dtype: Literal["auto", "float32", "bfloat16", "float16"]
    context_length: int | None
    trust_remote_code: bool
    task: Literal["generate", "embed", "rerank"] | None
    pooling: Literal["mean", "cls", "last"] | None
    quantization: Literal["int8"] | None
    # parallel
    tp_size: int
    pp_size: int
    dp_size: int
    nnodes: int
    node_rank: int
    dist_init_addr: str | None
    # spec
    speculative_algorithm: Literal["ngram", "draft_model"] | None
    speculative_draft_model_path: str | None
    speculative_num_steps: int
    speculative_eagle_topk: int
    speculative_num_draft_tokens: int
    speculative_ngram_min_match_window: int
    speculative_ngram_max_match_window: int
    speculative_adaptive_draft_length: bool
    speculative_adaptive_window: int
    speculative_adaptive_min_accept_rate: float
    speculative_adaptive_pause_steps: int
    speculative_disable_by_batch_size: int | None
    speculative_max_drafts_per_step: int | None
    speculative_attention_mode: Literal["prefill", "decode"]
    speculative_draft_attention_backend: (
        Literal["auto", "torch_native", "cpu_paged", "triton", "flashinfer", "intel_amx"] | None
    )
    # exec.kernel
    enable_deterministic_inference: bool | None
    attention_backend: Literal["auto", "torch_native", "cpu_paged", "triton", "flashinfer", "intel_amx"]
    prefill_attention_backend: Literal["auto", "torch_native", "cpu_paged", "triton", "flashinfer", "intel_amx"] | None
    decode_attention_backend: Literal["auto", "torch_native", "cpu_paged", "triton", "flashinfer", "intel_amx"] | None
    linear_attn_backend: Literal["torch_native", "cpu_fused", "triton", "flashinfer"] | None
    linear_attn_prefill_backend: Literal["torch_native", "cpu_fused", "triton", "flashinfer"] | None
    linear_attn_decode_backend: Literal["torch_native", "cpu_fused", "triton", "flashinfer"] | None
    quantized_activations: Literal["float32", "int8"] | None
    cpu_isa: Literal["avx2", "avx512", "amx"] | None
    # exec.graph
    disable_cuda_graph: bool
    cuda_graph_max_bs: int
    cuda_graph_decode_bs: tuple[int, ...] | None
    enable_torch_compile: bool
    # exec.moe
    moe_runner_backend: Literal["auto", "torch_native", "triton"]
    ep_size: int
    disable_shared_experts_fusion: bool
    # exec.mamba
    mamba_ssm_dtype: Literal["float32", "bfloat16", "float16"]
    max_mamba_cache_size: int | None
    mamba_snapshot_interval: int
    mamba_snapshot_memory_mb: float
    # exec.overlap
    disable_overlap_schedule: bool
    enable_two_batch_overlap: bool
    # disagg
    disaggregation_mode: Literal["null", "prefill", "decode"]
    disaggregation_bootstrap_port: int
    # mm
    mm_feature_transport: Literal["inline", "shm"]
    mm_max_items_per_request: int
    # serving
    host: str
    port: int
    api_key: str | None
    web_ui: bool
    max_n: int
    stream_interval: int
    max_request_body_mb: int
    max_stored_responses: int
    grammar_backend: Literal["xgrammar", "none"]
    tool_call_parser: Literal["hermes", "qwen25", "llama3"] | None
    reasoning_parser: Literal["qwen3", "deepseek-r1"] | None
    # observability
    log_level: Literal["debug", "info", "warning", "error", "critical"]
    log_requests: bool
    enable_metrics: bool
    # device
    device: Literal["auto", "cpu", "cuda"]
    random_seed: int
    cpu_threads: int | None
    # END generated leaves

    def __init__(self, **leaves: Any) -> None:
        object.__setattr__(self, "_state", RecordState.OPEN)
        object.__setattr__(self, "_provenance", {})
        object.__setattr__(self, "_origin", {})
        for name, spec in leaf_specs(Bags).items():
            self.put(name, spec.default, "default", "")
        for name, value in leaves.items():
            setattr(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in leaf_specs(Bags):
            leaf_spec(name, Bags)  # raises UnknownLeafError naming close matches
        self.put(name, checked_value(leaf_spec(name, Bags), value), "cli", f"assigned {value!r}")

    def put(self, name: str, value: Any, provenance: str, origin: str, *, declaring: bool = False) -> None:
        """Set one leaf with where it came from. Before resolution any layer may put; during
        resolution only a handler's declaration (`declaring=True`); after sealing nothing."""
        state = self._state
        allowed = RecordState.RESOLVING if declaring else RecordState.OPEN
        if state is not allowed:
            raise SealedRecordError(
                f"cannot set {name}: the record is {state.value}; "
                "set leaves before resolve(), and in a resolution handler only through declare()"
            )
        object.__setattr__(self, name, value)
        self._provenance[name] = provenance
        self._origin[name] = origin

    def value(self, name: str) -> Any:
        """One leaf's value by flat name (UnknownLeafError for a name no bag declares)."""
        leaf_spec(name, Bags)
        return getattr(self, name)

    def values(self) -> dict[str, Any]:
        """Every leaf's value by flat name, in schema order."""
        return {name: getattr(self, name) for name in LEAF_NAMES}

    def provenance(self) -> dict[str, str]:
        """Every leaf's provenance: default, file, env, cli or resolved:<handler>."""
        return dict(self._provenance)

    def provenance_of(self, name: str) -> str:
        """One leaf's provenance."""
        leaf_spec(name, Bags)
        return self._provenance[name]

    def origin_of(self, name: str) -> str:
        """Where exactly one leaf's value came from (`--page-size 16`, `SERVE_PORT`, `cfg.yaml:3`)."""
        leaf_spec(name, Bags)
        return self._origin[name]

    @property
    def state(self) -> RecordState:
        """Whether the record takes assignments, only declarations, or nothing."""
        return self._state

    def copy_for_resolution(self) -> ServerArgs:
        """A copy, with provenance, that takes only handler declarations."""
        copy = ServerArgs.__new__(ServerArgs)
        object.__setattr__(copy, "_state", RecordState.RESOLVING)
        object.__setattr__(copy, "_provenance", dict(self._provenance))
        object.__setattr__(copy, "_origin", dict(self._origin))
        for name in LEAF_NAMES:
            object.__setattr__(copy, name, getattr(self, name))
        return copy

    def seal(self) -> None:
        """Refuse every later change."""
        object.__setattr__(self, "_state", RecordState.SEALED)

    def bags(self) -> Bags:
        """The record projected into `Bags` (runs every bag's cross-leaf check)."""
        return bags_of(self.values())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ServerArgs):
            return NotImplemented
        return self.values() == other.values() and self._provenance == other._provenance

    __hash__ = None  # type: ignore[assignment]  # mutable until sealed

    def __repr__(self) -> str:
        changed = ", ".join(f"{n}={getattr(self, n)!r}" for n in LEAF_NAMES if self._provenance[n] != "default")
        return f"ServerArgs({changed})"

    # Derived members: each projects the record and calls the helper its bag accessor calls.

    @property
    def attention_backends(self) -> AttentionBackends:
        """(prefill, decode) attention backends with the base-field fallback applied."""
        return attention_backends_of(self.bags().exec.kernel)

    def linear_attn_backends(self, device_type: str) -> LinearAttnBackends:
        """Linear-attention kernels per phase that a runner on a `device_type` device runs."""
        return linear_attn_backends_of(self.bags().exec.kernel, device_type)

    @property
    def max_prefill_buffer_tokens(self) -> int:
        """Prompt tokens the prefill buffers must hold across pipeline stages."""
        bags = self.bags()
        return max_prefill_buffer_tokens_of(bags.schedule, bags.parallel)

    @property
    def mamba_cache_slots(self) -> int:
        """Recurrent-state slots of a hybrid model's state pool."""
        bags = self.bags()
        return mamba_cache_slots_of(bags.exec.mamba, bags.schedule)

    @property
    def max_speculative_num_draft_tokens(self) -> int:
        """The most draft tokens one verify pass adds per request."""
        return max_speculative_num_draft_tokens_of(self.bags().spec)

    @property
    def effective_cuda_graph_decode_bs(self) -> tuple[int, ...]:
        """Decode batch sizes to capture (the leaf `cuda_graph_decode_bs` is only the explicit list)."""
        return cuda_graph_decode_bs_of(self.bags().exec.graph)

    @property
    def chunk_size(self) -> int | None:
        """The prefill chunk in whole pages, or None when chunking is off."""
        return chunk_size_of(self.bags().schedule)
