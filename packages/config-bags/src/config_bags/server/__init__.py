"""This server's configuration, built on the config-bags mechanism: its root (`Bags`) with its
roles and rules, one bag per namespace, a named accessor per namespace (`get_schedule()`), and
the derived values as pure `*_of(bag, ...)` helpers with an accessor each (`chunk_size()`).

    from config_bags import override, publish
    from config_bags.server import Bags, get_schedule

    publish(Bags(), role="standalone")
    get_schedule().page_size          # 1
    override("admin", page_size=16)   # checked first; logged; subscribers told

The mechanism never imports this package (an import-linter contract of the workspace keeps it
so); a stack that does not serve these bags never loads them.
"""

from config_bags.server.accessors import (
    get_device,
    get_disagg,
    get_exec,
    get_memory,
    get_mm,
    get_model,
    get_observability,
    get_parallel,
    get_schedule,
    get_serving,
    get_spec,
)
from config_bags.server.bags import (
    DeviceBag,
    DisaggBag,
    ExecBag,
    GraphBag,
    KernelBag,
    MambaBag,
    MemoryBag,
    MmBag,
    ModelBag,
    MoeBag,
    ObservabilityBag,
    OverlapBag,
    ParallelBag,
    ScheduleBag,
    ServingBag,
    SpecBag,
)
from config_bags.server.bags.attention_names import (
    BATCH_INVARIANT_KERNELS,
    AttentionBackendName,
    AttentionHalf,
    AttentionKernelName,
)
from config_bags.server.derived import (
    DETERMINISTIC_DEVICE_TYPES,
    AttentionBackends,
    LinearAttnBackends,
    attention_backends_of,
    attention_leaf_of,
    chunk_size_of,
    context_length_of,
    context_length_refusal,
    cuda_graph_decode_bs_of,
    deterministic_inference_of,
    device_linear_attn_backend_of,
    linear_attn_backends_of,
    mamba_cache_slots_of,
    mamba_snapshot_slots_of,
    max_prefill_buffer_tokens_of,
    max_speculative_num_draft_tokens_of,
    max_total_tokens_of,
    quantized_activations_of,
    snapshot_grid_refusal,
)
from config_bags.server.derived_accessors import (
    attention_backends,
    chunk_size,
    cuda_graph_decode_bs,
    deterministic_inference,
    linear_attn_backends,
    mamba_cache_slots,
    mamba_snapshot_slots,
    max_prefill_buffer_tokens,
    max_speculative_num_draft_tokens,
)
from config_bags.server.model_rules import SNAPSHOT_GRID, context_length_within_model
from config_bags.server.published import published_bags
from config_bags.server.roles import ROLE_READS, SERVER_ROLES, Role
from config_bags.server.root import INVARIANTS, Bags

__all__ = [
    "AttentionBackendName",
    "AttentionBackends",
    "AttentionHalf",
    "AttentionKernelName",
    "BATCH_INVARIANT_KERNELS",
    "Bags",
    "DETERMINISTIC_DEVICE_TYPES",
    "DeviceBag",
    "DisaggBag",
    "ExecBag",
    "GraphBag",
    "INVARIANTS",
    "KernelBag",
    "LinearAttnBackends",
    "MambaBag",
    "MemoryBag",
    "MmBag",
    "ModelBag",
    "MoeBag",
    "ObservabilityBag",
    "OverlapBag",
    "ParallelBag",
    "ROLE_READS",
    "Role",
    "SERVER_ROLES",
    "SNAPSHOT_GRID",
    "ScheduleBag",
    "ServingBag",
    "SpecBag",
    "attention_backends",
    "attention_backends_of",
    "attention_leaf_of",
    "chunk_size",
    "chunk_size_of",
    "context_length_of",
    "context_length_refusal",
    "context_length_within_model",
    "cuda_graph_decode_bs",
    "cuda_graph_decode_bs_of",
    "deterministic_inference",
    "deterministic_inference_of",
    "device_linear_attn_backend_of",
    "get_device",
    "get_disagg",
    "get_exec",
    "get_memory",
    "get_mm",
    "get_model",
    "get_observability",
    "get_parallel",
    "get_schedule",
    "get_serving",
    "get_spec",
    "linear_attn_backends",
    "linear_attn_backends_of",
    "mamba_cache_slots",
    "mamba_cache_slots_of",
    "mamba_snapshot_slots",
    "mamba_snapshot_slots_of",
    "max_prefill_buffer_tokens",
    "max_prefill_buffer_tokens_of",
    "max_speculative_num_draft_tokens",
    "max_speculative_num_draft_tokens_of",
    "max_total_tokens_of",
    "published_bags",
    "quantized_activations_of",
    "snapshot_grid_refusal",
]
