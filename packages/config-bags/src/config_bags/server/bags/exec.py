"""exec: how the forward pass executes (kernels, graphs, MoE, Mamba, overlap)."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from config_bags.bag import Bag
from config_bags.constraints import BatchSizes, NonNegativeFloat, PositiveInt
from config_bags.errors import LeafValueError
from config_bags.leaf import leaf
from config_bags.server.bags.attention_names import AttentionBackendName, LinearAttnBackendName

MoeRunnerBackend = Literal["auto", "torch_native", "triton"]
MambaSsmDtype = Literal["float32", "bfloat16", "float16"]
QuantizedActivations = Literal["float32", "int8"]
CpuIsa = Literal["avx2", "avx512", "amx"]


class KernelBag(Bag, frozen=True, kw_only=True):
    """Kernels: attention per half (the split fields win over the base field for their half), and
    whether every kernel of the forward is batch-invariant."""

    enable_deterministic_inference: Annotated[
        bool | None,
        leaf(
            "Batch-invariant kernels: a request's tokens and logprobs are bitwise the same however it is batched, "
            "chunked or cached (unset: on a CPU with both attention halves auto or cpu_paged and no torch.compile; "
            "off otherwise).",
            hot=False,
        ),
    ] = None

    attention_backend: Annotated[
        AttentionBackendName,
        leaf(
            "Attention backend for both prefill and decode (auto: the factory picks per host and per half).", hot=False
        ),
    ] = "auto"
    prefill_attention_backend: Annotated[
        AttentionBackendName | None, leaf("Attention backend for prefill/extend (unset: attention_backend).", hot=False)
    ] = None
    decode_attention_backend: Annotated[
        AttentionBackendName | None, leaf("Attention backend for decode (unset: attention_backend).", hot=False)
    ] = None
    linear_attn_backend: Annotated[
        LinearAttnBackendName | None, leaf("Linear-attention kernels for both phases (unset: triton).", hot=False)
    ] = None
    linear_attn_prefill_backend: Annotated[
        LinearAttnBackendName | None, leaf("Linear-attention prefill kernel as the operator named it.", hot=False)
    ] = None
    linear_attn_decode_backend: Annotated[
        LinearAttnBackendName | None, leaf("Linear-attention decode kernel as the operator named it.", hot=False)
    ] = None
    quantized_activations: Annotated[
        QuantizedActivations | None,
        leaf(
            "How a GGUF checkpoint's quantized matrices read their input rows: int8 (rows quantized per 32 values, "
            "integer dot products as llama.cpp computes; fast, batch-invariant, not bitwise the de-quantized model) "
            "or float32 (bitwise the de-quantized model's fp32 linear; slower). Unset: int8 for a GGUF checkpoint "
            "on a CPU with AVX2, float32 otherwise.",
            hot=False,
        ),
    ] = None
    cpu_isa: Annotated[
        CpuIsa | None,
        leaf(
            "The x86-64 instruction tier the quantized kernels are built for: avx2 (maddubs), avx512 (512-bit "
            "VNNI dot products) or amx (also AMX-INT8 tiles for prompts and large batches); every tier computes "
            "the same bits. Unset: the highest this CPU runs; a tier above it is refused.",
            hot=False,
        ),
    ] = None


class GraphBag(Bag, frozen=True, kw_only=True):
    """Captured and compiled decode graphs."""

    disable_cuda_graph: Annotated[bool, leaf("Run decode eagerly instead of replaying captured graphs.", hot=False)] = (
        False
    )
    cuda_graph_max_bs: Annotated[PositiveInt, leaf("Largest decode batch captured as a graph.", hot=False)] = 160
    cuda_graph_decode_bs: Annotated[
        BatchSizes | None,
        leaf("Decode batch sizes captured as graphs (unset: derived from cuda_graph_max_bs).", hot=False),
    ] = None
    enable_torch_compile: Annotated[
        bool,
        leaf(
            "Compile the one-request decode step with torch.compile (faster batch-1 decode; a minute or more "
            "at start).",
            hot=False,
        ),
    ] = False

    def check_leaves_together(self) -> None:
        if self.cuda_graph_decode_bs is not None and list(self.cuda_graph_decode_bs) != sorted(
            set(self.cuda_graph_decode_bs)
        ):
            raise LeafValueError(
                f"GraphBag.cuda_graph_decode_bs = {list(self.cuda_graph_decode_bs)} is not accepted; accepted: "
                "strictly increasing batch sizes"
            )


class MoeBag(Bag, frozen=True, kw_only=True):
    """Mixture-of-experts execution."""

    moe_runner_backend: Annotated[MoeRunnerBackend, leaf("Kernel family running the expert MLPs.", hot=False)] = "auto"
    ep_size: Annotated[PositiveInt, leaf("Expert-parallel degree.", hot=False)] = 1
    disable_shared_experts_fusion: Annotated[
        bool, leaf("Keep shared experts out of the routed-expert kernel.", hot=False)
    ] = False


class MambaBag(Bag, frozen=True, kw_only=True):
    """State-space and linear-attention layer state."""

    mamba_ssm_dtype: Annotated[MambaSsmDtype, leaf("Element type of the recurrent SSM state.", hot=False)] = "float32"
    max_mamba_cache_size: Annotated[
        PositiveInt | None, leaf("Recurrent-state slots of a hybrid model (unset: max_running_requests).", hot=False)
    ] = None
    mamba_snapshot_interval: Annotated[
        PositiveInt,
        leaf(
            "Tokens between the recurrent-state snapshots a hybrid model keeps in its prefix cache (a multiple of "
            "page_size; the prefill chunk a multiple of it, or it of the chunk): a cached prefix resumes at the "
            "last snapshot it reaches.",
            hot=False,
        ),
    ] = 512
    mamba_snapshot_memory_mb: Annotated[
        NonNegativeFloat,
        leaf(
            "Memory for a hybrid model's recurrent-state snapshots, in MiB (apart from the KV cache); 0 keeps none, "
            "and its requests reuse no cached prefix.",
            hot=False,
        ),
    ] = 256.0


class OverlapBag(Bag, frozen=True, kw_only=True):
    """Overlapping CPU scheduling with device compute."""

    disable_overlap_schedule: Annotated[
        bool, leaf("Schedule the next batch only after the current one finishes.", hot=False)
    ] = False
    enable_two_batch_overlap: Annotated[
        bool, leaf("Split each batch in two and overlap their communication.", hot=False)
    ] = False


class ExecBag(Bag, frozen=True, kw_only=True):
    """Execution: the five sub-bags."""

    kernel: KernelBag = msgspec.field(default_factory=KernelBag)
    graph: GraphBag = msgspec.field(default_factory=GraphBag)
    moe: MoeBag = msgspec.field(default_factory=MoeBag)
    mamba: MambaBag = msgspec.field(default_factory=MambaBag)
    overlap: OverlapBag = msgspec.field(default_factory=OverlapBag)
