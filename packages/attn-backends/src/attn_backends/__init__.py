"""attn_backends: attention kernels, the stamping factory, and the pair a runner serves with.

    stamp, backend = build_attention_pair("auto", "auto", device_type="cpu")
    stamp                            # AttentionStamp(prefill='torch_native', decode='cpu_paged', ...)
    backend.plan(metadata)           # once per forward (a hybrid container selects its half here)
    out = backend.attend(q, k_cache, v_cache, scale=...)   # once per layer

Kernels: torch_native (pure torch, any device), cpu_paged (the C++ paged kernel, CPU), triton
(CUDA; on a CPU only under TRITON_INTERPRET=1) and flashinfer (the optional extra, CUDA).
`auto` and the deprecated alias `intel_amx` build one of them; only a kernel name is a stamp.
A batch-invariant runner (deterministic inference) gets cpu_paged for both halves from `auto`, and
a refusal for any kernel that is not batch-invariant (`batch_invariance`). `attention_choice(name,
half=..., device_type=..., batch_invariant=...)` answers what a configured name builds and why that
kernel cannot serve (on this host; batch-invariant), without building it.
A speculative draft runner builds through `DraftBackendFactory`: a `DraftRunnerBackend` of a
`DraftExtendBackend` (the prefill half) and a `MultiStepDraftBackend` (one decode backend per step).
A hybrid model's Gated-DeltaNet layers run `linear_attn_kernels_for(name, device_type)`: the
causal conv and the gated delta rule, varlen prefill, decode and verify over a state pool's slots;
`LinearAttnBackendFactory` resolves a runner's choice (`resolve_linear_attn_backends`, with a
target's per-runner prefill default) and builds the backend that reads it off the stamped runner.
"""

from attn_backends.backend import AttentionBackend, UnstampedBackendError
from attn_backends.backends.cpu_paged import CpuPagedBackend
from attn_backends.backends.hybrid import HybridAttentionBackend
from attn_backends.backends.torch_native import TorchNativeBackend
from attn_backends.backends.wrapper import WrapperBackend
from attn_backends.choice.attention_choice import AttentionChoice, attention_choice
from attn_backends.choice.batch_invariance import batch_invariance_refusal
from attn_backends.choice.effective_names import (
    DEPRECATED_ALIASES,
    UnknownAttentionBackendError,
    auto_kernel_of,
    effective_backend_name,
    registered_attention_backends,
)
from attn_backends.choice.host_support import refusal_on
from attn_backends.choice.kv_dtypes import kv_dtype_refusal
from attn_backends.choice.pair import build_attention_pair
from attn_backends.choice.registry import REGISTRY, AttentionBackendUnavailableError, build_attention_backend
from attn_backends.choice.stamping import stamp_built
from attn_backends.dispatch import (
    KERNEL_NAMES,
    AttentionStamp,
    ForwardMode,
    dispatched_half,
    dispatched_half_of,
    serving_attention_backend,
)
from attn_backends.drafts.extend import DraftExtendBackend
from attn_backends.drafts.factory import DraftBackendFactory
from attn_backends.drafts.multi_step import MultiStepDraftBackend
from attn_backends.drafts.runner_backend import DraftRunnerBackend
from attn_backends.linear.backend import LinearAttnBackend, LinearAttnBackendFactory
from attn_backends.linear.kernels import TORCH_NATIVE_KERNELS, LinearAttnKernels, linear_attn_kernels_for
from attn_backends.linear.resolver import resolve_linear_attn_backends
from attn_backends.metadata import AttentionMetadataView

__all__ = [
    "KERNEL_NAMES",
    "AttentionStamp",
    "ForwardMode",
    "dispatched_half",
    "dispatched_half_of",
    "serving_attention_backend",
    "DEPRECATED_ALIASES",
    "REGISTRY",
    "AttentionBackend",
    "AttentionBackendUnavailableError",
    "AttentionChoice",
    "AttentionMetadataView",
    "CpuPagedBackend",
    "DraftBackendFactory",
    "DraftExtendBackend",
    "DraftRunnerBackend",
    "HybridAttentionBackend",
    "LinearAttnBackend",
    "LinearAttnBackendFactory",
    "LinearAttnKernels",
    "MultiStepDraftBackend",
    "TORCH_NATIVE_KERNELS",
    "TorchNativeBackend",
    "UnknownAttentionBackendError",
    "UnstampedBackendError",
    "WrapperBackend",
    "attention_choice",
    "auto_kernel_of",
    "batch_invariance_refusal",
    "build_attention_backend",
    "build_attention_pair",
    "effective_backend_name",
    "kv_dtype_refusal",
    "linear_attn_kernels_for",
    "resolve_linear_attn_backends",
    "refusal_on",
    "registered_attention_backends",
    "stamp_built",
]
