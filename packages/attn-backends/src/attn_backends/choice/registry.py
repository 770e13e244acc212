"""The attention-backend registry and the factory that answers (effective_name, backend).

Every entry answers the kernel it actually built: a kernel entry its own name, the deprecated
alias its target's (with a warning), `auto` the kernel it picked for the host and the half. The
factory refuses an answer that is not a kernel name, and refuses a kernel that cannot run on the
host with the reason and the alternatives. triton and flashinfer are imported only when built.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

from attn_backends.backend import AttentionBackend
from attn_backends.backends.cpu_paged import CpuPagedBackend
from attn_backends.backends.torch_native import TorchNativeBackend
from attn_backends.choice.attention_choice import attention_choice
from attn_backends.choice.effective_names import AUTO, DEPRECATED_ALIASES, effective_backend_name, kernel_named
from config_bags.server import AttentionHalf, AttentionKernelName

# (half, device type, batch_invariant) -> (the kernel it built, the backend)
Entry = Callable[[AttentionHalf, str, bool], tuple[str, AttentionBackend]]


class AttentionBackendUnavailableError(RuntimeError):
    """A registered attention backend that cannot run on this host (the message says why and what can)."""


def _torch_native(half: AttentionHalf, device_type: str, batch_invariant: bool) -> tuple[str, AttentionBackend]:
    return "torch_native", TorchNativeBackend()


def _cpu_paged(half: AttentionHalf, device_type: str, batch_invariant: bool) -> tuple[str, AttentionBackend]:
    return "cpu_paged", CpuPagedBackend()


def _triton(half: AttentionHalf, device_type: str, batch_invariant: bool) -> tuple[str, AttentionBackend]:
    from attn_backends.backends.triton_backend import TritonBackend

    return "triton", TritonBackend()


def _flashinfer(half: AttentionHalf, device_type: str, batch_invariant: bool) -> tuple[str, AttentionBackend]:
    from attn_backends.backends.flashinfer_backend import FlashInferBackend

    return "flashinfer", FlashInferBackend()


_KERNEL_ENTRIES: dict[str, Entry] = {
    "torch_native": _torch_native,
    "cpu_paged": _cpu_paged,
    "triton": _triton,
    "flashinfer": _flashinfer,
}


def _auto(half: AttentionHalf, device_type: str, batch_invariant: bool) -> tuple[str, AttentionBackend]:
    kernel = effective_backend_name(AUTO, half=half, device_type=device_type, batch_invariant=batch_invariant)
    return _KERNEL_ENTRIES[kernel](half, device_type, batch_invariant)


def _deprecated_alias(alias: str) -> Entry:
    """The entry of another stack's name: builds its target, warning with the real name."""

    def entry(half: AttentionHalf, device_type: str, batch_invariant: bool) -> tuple[str, AttentionBackend]:
        target = DEPRECATED_ALIASES[alias]
        warnings.warn(
            f"attention backend {alias!r} is a deprecated alias of {target!r}; it builds {target!r}: name {target!r} "
            "instead",
            FutureWarning,
            stacklevel=3,
        )
        return _KERNEL_ENTRIES[target](half, device_type, batch_invariant)

    return entry


REGISTRY: dict[str, Entry] = {
    **_KERNEL_ENTRIES,
    **{alias: _deprecated_alias(alias) for alias in DEPRECATED_ALIASES},
    AUTO: _auto,
}


def build_attention_backend(
    name: str, *, half: AttentionHalf, device_type: str, batch_invariant: bool
) -> tuple[AttentionKernelName, AttentionBackend]:
    """Build what `name` names for `half` on a `device_type` host, for a batch-invariant runner or
    not; answers (effective_name, backend).

    The caller stamps the backend with the effective name (`build_attention_pair` does)."""
    choice = attention_choice(name, half=half, device_type=device_type, batch_invariant=batch_invariant)
    shown = name if name == choice.kernel else f"{name} (builds {choice.kernel})"
    if choice.host_refusal is not None:
        raise AttentionBackendUnavailableError(
            f"attention backend {shown} for the {half} half cannot run here: {choice.host_refusal}"
        )
    if choice.invariance_refusal is not None:
        raise AttentionBackendUnavailableError(
            f"attention backend {shown} for the {half} half cannot serve deterministic "
            f"inference: {choice.invariance_refusal}"
        )
    effective, backend = REGISTRY[name](half, device_type, batch_invariant)
    built = kernel_named(effective)
    if built is not None:
        return built, backend
    raise AssertionError(
        f"registry entry {name!r} answered {effective!r}, which is no kernel; an entry answers what it built"
    )
