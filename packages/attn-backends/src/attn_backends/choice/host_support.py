"""Whether a kernel can run on this host, answered without building it (resolution asks before launch)."""

from __future__ import annotations

import os

from attn_backends.backends.flashinfer_backend import flashinfer_unavailable_reason
from attn_backends.dispatch import KERNEL_NAMES
from config_bags.server import AttentionKernelName


def refusal_on(kernel: AttentionKernelName, device_type: str) -> str | None:
    """Why `kernel` cannot run on a `device_type` device here, naming what would; None when it can.

    Only a kernel name is answered: `auto` or an alias raises (resolve it with
    effective_backend_name first), so no name that builds something else can read as a yes."""
    if kernel not in KERNEL_NAMES:
        raise ValueError(
            f"refusal_on answers for kernels ({', '.join(KERNEL_NAMES)}), not {kernel!r}: "
            "resolve auto and aliases with effective_backend_name first"
        )
    if kernel == "torch_native":
        return None
    if kernel == "cpu_paged":
        return (
            None
            if device_type == "cpu"
            else (
                f"cpu_paged runs on a CPU only, not on {device_type}; on {device_type} use triton, flashinfer or "
                "torch_native"
            )
        )
    if kernel == "triton":
        if device_type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
            return (
                "triton runs on a CPU only under TRITON_INTERPRET=1 (its interpreter, for tests); on a CPU use "
                "torch_native, cpu_paged or auto"
            )
        return None
    if device_type != "cuda":
        return f"flashinfer runs on CUDA devices only, not on {device_type}; here use torch_native, cpu_paged or auto"
    return flashinfer_unavailable_reason()
