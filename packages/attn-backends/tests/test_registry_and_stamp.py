"""The factory answers (effective_name, backend); a name nobody registered lists the registered ones;
a backend reports only the name it was stamped with."""

from __future__ import annotations

import pytest

from attn_backends import (
    TorchNativeBackend,
    UnknownAttentionBackendError,
    UnstampedBackendError,
    build_attention_backend,
    register_attention_backend,
    registered_attention_backends,
)


def test_factory_builds_torch_native_and_answers_its_name() -> None:
    name, backend = build_attention_backend("torch_native")
    assert name == "torch_native" and isinstance(backend, TorchNativeBackend)
    assert "torch_native" in registered_attention_backends()


def test_unknown_name_lists_the_registered_ones() -> None:
    with pytest.raises(UnknownAttentionBackendError, match=r"'flashinfer' is not registered; registered: .*torch_native"):
        build_attention_backend("flashinfer")


def test_a_name_is_registered_once() -> None:
    with pytest.raises(ValueError, match="'torch_native' is already registered"):
        register_attention_backend("torch_native", TorchNativeBackend)


def test_unstamped_backend_raises_when_asked_for_its_name() -> None:
    """Reverse-verified: dropping the unstamped check in effective_name makes this test fail."""
    backend = TorchNativeBackend()
    with pytest.raises(UnstampedBackendError, match="TorchNativeBackend has no effective-name stamp"):
        _ = backend.effective_name
    backend.stamp("torch_native")
    assert backend.effective_name == "torch_native"
    backend.stamp("torch_native")
    with pytest.raises(ValueError, match="already stamped 'torch_native'"):
        backend.stamp("triton")
    assert backend.effective_name == "torch_native"
