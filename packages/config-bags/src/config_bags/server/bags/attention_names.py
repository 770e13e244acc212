"""The attention and linear-attention backend names an operator may ask for.

An attention name is a kernel (`torch_native`, `cpu_paged`, `triton`, `flashinfer`), `auto` (the
factory picks a kernel per host and per half) or another stack's name for one of ours
(`intel_amx`, SGLang's CPU backend, builds `cpu_paged`). Only a kernel name is ever a stamp.
`BATCH_INVARIANT_KERNELS` are the kernels deterministic inference builds (attn-backends'
`batch_invariance` says why the others are not).
"""

from __future__ import annotations

from typing import Literal

AttentionHalf = Literal["prefill", "decode"]
AttentionKernelName = Literal["torch_native", "cpu_paged", "triton", "flashinfer"]
AttentionBackendName = Literal["auto", "torch_native", "cpu_paged", "triton", "flashinfer", "intel_amx"]
BATCH_INVARIANT_KERNELS: tuple[AttentionKernelName, ...] = ("cpu_paged",)
LinearAttnBackendName = Literal["torch_native", "cpu_fused", "triton", "flashinfer"]
MoeRunnerBackend = Literal["auto", "torch_native", "triton"]
MambaSsmDtype = Literal["float32", "bfloat16", "float16"]
