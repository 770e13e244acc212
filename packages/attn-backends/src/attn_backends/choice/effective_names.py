"""What each registered name builds: a kernel builds itself, an alias its target, `auto` the kernel
that suits the host and the half.

One function answers it (`effective_backend_name`), so the factory that builds a backend, the
resolution that checks a launch and the stamp a runner carries agree by construction.
"""

from __future__ import annotations

import importlib.util

from attn_backends.dispatch import KERNEL_NAMES
from config_bags.server import AttentionHalf, AttentionKernelName

# Another stack's name for one of our kernels, deprecated here: it builds the target, with a warning.
DEPRECATED_ALIASES: dict[str, AttentionKernelName] = {"intel_amx": "cpu_paged"}
AUTO = "auto"


def auto_kernel_of(half: AttentionHalf, device_type: str, *, batch_invariant: bool) -> AttentionKernelName:
    """The kernel `auto` builds. On a CPU: the C++ paged kernel for both halves when the runner is
    batch-invariant (it is the one kernel that is, batch_invariance.py); otherwise SDPA-based
    torch_native for prompts (its rounding is the one transformers shares) and the paged kernel for
    decodes (the fastest decode measured here, docs/benchmarks.md). On CUDA: flashinfer where it is
    installed, else triton (neither is batch-invariant: the factory refuses them then)."""
    if device_type == "cpu":
        return "torch_native" if half == "prefill" and not batch_invariant else "cpu_paged"
    return "flashinfer" if importlib.util.find_spec("flashinfer") is not None else "triton"


def effective_backend_name(
    name: str, *, half: AttentionHalf, device_type: str, batch_invariant: bool
) -> AttentionKernelName:
    """The kernel `name` builds for `half` on a `device_type` host, batch-invariant or not; refuses
    a name that is none of kernel, alias or auto. (Building an alias warns; answering what it
    builds does not.)"""
    if name == AUTO:
        return auto_kernel_of(half, device_type, batch_invariant=batch_invariant)
    target = DEPRECATED_ALIASES.get(name) or kernel_named(name)
    if target is not None:
        return target
    raise UnknownAttentionBackendError(
        f"attention backend {name!r} is not registered; registered: {', '.join(registered_attention_backends())}"
    )


def kernel_named(name: str) -> AttentionKernelName | None:
    """`name` as a kernel name, or None when it names no kernel (auto, an alias, anything else)."""
    for kernel in KERNEL_NAMES:
        if kernel == name:
            return kernel
    return None


def registered_attention_backends() -> tuple[str, ...]:
    """Every name the factory builds from, sorted: the kernels, their aliases and auto."""
    return tuple(sorted((*KERNEL_NAMES, *DEPRECATED_ALIASES, AUTO)))


class UnknownAttentionBackendError(ValueError):
    """An attention backend name that nothing is registered under."""
