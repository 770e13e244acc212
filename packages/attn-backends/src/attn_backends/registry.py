"""The attention-backend registry and the factory that answers (effective_name, backend)."""

from __future__ import annotations

from collections.abc import Callable

from attn_backends.backend import AttentionBackend
from attn_backends.torch_native import TorchNativeBackend

BackendBuilder = Callable[[], AttentionBackend]


class UnknownAttentionBackendError(ValueError):
    """An attention backend name that nothing is registered under."""


_REGISTRY: dict[str, BackendBuilder] = {"torch_native": TorchNativeBackend}


def register_attention_backend(name: str, builder: BackendBuilder) -> None:
    """Register `builder` under `name`; a name registered twice is refused."""
    if name in _REGISTRY:
        raise ValueError(f"attention backend {name!r} is already registered; registered: {', '.join(registered_attention_backends())}")
    _REGISTRY[name] = builder


def registered_attention_backends() -> tuple[str, ...]:
    """The names the factory can build, sorted."""
    return tuple(sorted(_REGISTRY))


def build_attention_backend(name: str) -> tuple[str, AttentionBackend]:
    """Build the backend registered under `name`; answers (effective_name, backend).

    The caller stamps the backend with the effective name (`backend.stamp(name)`).
    """
    builder = _REGISTRY.get(name)
    if builder is None:
        raise UnknownAttentionBackendError(
            f"attention backend {name!r} is not registered; registered: {', '.join(registered_attention_backends())}"
        )
    return name, builder()
