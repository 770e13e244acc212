"""attn_backends: the attention-backend registry, its stamping factory, and the torch_native backend.

    name, backend = build_attention_backend("torch_native")
    backend.stamp(name)              # the runner that built it stamps it
    backend.plan(metadata)           # once per forward
    out = backend.attend(q, k_cache, v_cache, scale=...)   # once per layer
"""

from attn_backends.backend import AttentionBackend, UnstampedBackendError
from attn_backends.metadata import AttentionMetadataView
from attn_backends.registry import (
    UnknownAttentionBackendError,
    build_attention_backend,
    register_attention_backend,
    registered_attention_backends,
)
from attn_backends.torch_native import TorchNativeBackend

__all__ = [
    "AttentionBackend",
    "AttentionMetadataView",
    "TorchNativeBackend",
    "UnknownAttentionBackendError",
    "UnstampedBackendError",
    "build_attention_backend",
    "register_attention_backend",
    "registered_attention_backends",
]
