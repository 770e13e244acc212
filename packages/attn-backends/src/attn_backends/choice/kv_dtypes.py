"""Which KV-cache dtypes each attention kernel reads, under which compute dtype.

Every kernel reads a KV cache in the compute dtype. cpu_paged also reads a bf16 cache under fp32
compute: a float32 model (a quantized checkpoint's, on a CPU) then reads half the bytes per key,
which is most of what a large decode batch reads (docs/benchmarks.md, CPU speed).
"""

from __future__ import annotations

import torch

from attn_backends.kernels.paged_attention_kernel import POOL_DTYPES
from config_bags.server import AttentionKernelName

# kernel -> the (compute, KV) dtype pairs it reads beside the compute dtype's own: cpu_paged's are
# the mixed entries its C++ kernel has.
_NARROWER_KV: dict[str, frozenset[tuple[torch.dtype, torch.dtype]]] = {
    "cpu_paged": frozenset((compute, kv) for compute, kv in POOL_DTYPES if compute != kv),
}


def kv_dtype_refusal(kernel: AttentionKernelName, dtype: torch.dtype, kv_dtype: torch.dtype) -> str | None:
    """Why `kernel` cannot attend a `kv_dtype` KV cache under `dtype` compute, naming what it
    reads; None when it can."""
    if kv_dtype == dtype or (dtype, kv_dtype) in _NARROWER_KV.get(kernel, frozenset()):
        return None
    narrower = [
        f"{_name(kv)} under {_name(compute)}" for compute, kv in sorted(_NARROWER_KV.get(kernel, frozenset()), key=str)
    ]
    accepted = " or ".join([f"the compute dtype ({_name(dtype)})", *narrower])
    return (
        f"attention {kernel} cannot read a {_name(kv_dtype)} KV cache under {_name(dtype)} compute; it reads {accepted}"
    )


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")
