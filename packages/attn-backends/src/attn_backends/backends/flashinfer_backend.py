"""flashinfer: attention through flashinfer's batch paged-KV wrappers (CUDA only, optional extra).

The pool [kv_heads, slots, head_dim] is handed over without a copy as flashinfer's "HND" paged
layout [pages, kv_heads, page_size, head_dim]: a strided view whose page stride is
page_size * head_dim and whose head stride is slots * head_dim. flashinfer's kernels take the page,
head and token strides from the tensors (only head_dim must be stride 1).

A forward whose requests all decode one token runs the decode wrapper; any other runs the prefill
wrapper, causal over the whole batch (flashinfer aligns the causal mask to each request's last key,
so a request over a cached prefix sees its prefix). Head counts, head_dim and dtypes are only known
from the first layer's tensors, so `plan` records the forward and the first `attend` plans the
wrapper; later layers reuse that plan.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from typing import Any

import torch

from attn_backends.backend import AttentionBackend
from attn_backends.backends.flashinfer_csr import PagedCsr, paged_csr_of
from attn_backends.metadata import AttentionMetadataView

INSTALL_HINT = "install attn-backends[flashinfer] (flashinfer-python), or choose torch_native / triton"
WORKSPACE_BYTES = 128 * 1024 * 1024  # the size flashinfer's docs recommend for its split-KV scratch
# Query heads per KV head that run on the CUDA-core decode kernel (it is compiled for 1, 2, 3, 4, 6
# and 8 only); wider groups run on the tensor-core decode kernel, which takes any group size.
CUDA_CORE_DECODE_GROUPS = (1, 2, 3, 4)
# flashinfer's FA2 paged-KV descriptor keeps strides in 32 bits.
MAX_KV_STRIDE = 2**32 - 1


def flashinfer_unavailable_reason() -> str | None:
    """Why flashinfer cannot be imported here; None when it can be found. Does not import it."""
    if importlib.util.find_spec("flashinfer") is None:
        return f"flashinfer is not installed: {INSTALL_HINT}"
    return None


def hnd_pages_view(cache: torch.Tensor, page_size: int) -> torch.Tensor:
    """The pool [kv_heads, slots, head_dim] as flashinfer's HND pages [pages, kv_heads, page_size, head_dim],
    without a copy."""
    kv_heads, slots, head_dim = cache.shape
    if slots % page_size:
        raise ValueError(f"the pool holds {slots} slots, not a whole number of pages of {page_size}")
    if cache.stride(2) != 1:
        raise ValueError(f"flashinfer reads head_dim contiguously; this pool's head_dim stride is {cache.stride(2)}")
    view = cache.view(kv_heads, slots // page_size, page_size, head_dim).permute(1, 0, 2, 3)
    if max(view.stride()) > MAX_KV_STRIDE:
        raise ValueError(
            f"a pool of {slots} slots x {head_dim} head_dim per KV head exceeds flashinfer's 32-bit KV strides; "
            "use a smaller pool per layer, or torch_native / triton"
        )
    return view


@dataclass(frozen=True)
class ForwardPlan:
    """What `plan` recorded about one forward."""

    csr: PagedCsr
    page_size: int
    all_decode: bool


@dataclass(frozen=True)
class KernelShape:
    """What the wrapper was planned for; a layer that differs re-plans."""

    heads: int
    kv_heads: int
    head_dim: int
    q_dtype: torch.dtype
    kv_dtype: torch.dtype
    scale: float


class FlashInferBackend(AttentionBackend):
    """Attention through flashinfer's BatchDecode/BatchPrefill paged-KV wrappers on a CUDA device."""

    def __init__(self) -> None:
        """Imports flashinfer; ImportError with the install hint when it is missing."""
        reason = flashinfer_unavailable_reason()
        if reason is not None:
            raise ImportError(reason)
        try:
            import flashinfer
        except ImportError as exc:
            raise ImportError(f"flashinfer is installed but cannot be imported ({exc}); {INSTALL_HINT}") from exc
        self._flashinfer: Any = flashinfer
        self._device: torch.device | None = None
        self._workspace: torch.Tensor | None = None
        self._prefill: Any = None
        self._decode: dict[bool, Any] = {}  # by use_tensor_cores
        self._forward: ForwardPlan | None = None
        self._planned: KernelShape | None = None  # None: this forward's wrapper is not planned yet

    def plan(self, metadata: AttentionMetadataView) -> None:
        """Record this forward's CSR arrays; the first attend plans the wrapper."""
        device = metadata.page_table.device
        _require_cuda(device)
        if device != self._device:
            self._start_on(device)
        requests = metadata.page_table.shape[0]
        all_decode = metadata.max_extend_len == 1 and metadata.num_tokens == requests
        self._forward = ForwardPlan(paged_csr_of(metadata), metadata.page_size, all_decode)
        self._planned = None

    def attend(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, *, scale: float) -> torch.Tensor:
        """Attention of the planned forward for one layer."""
        forward = self._forward
        if forward is None:
            raise RuntimeError("attend() was called before plan(); plan each forward first")
        _require_cuda(q.device)
        shape = KernelShape(q.shape[1], k_cache.shape[0], q.shape[2], q.dtype, k_cache.dtype, scale)
        wrapper = self._decode_wrapper(shape) if forward.all_decode else self._prefill
        if shape != self._planned:
            self._plan_wrapper(wrapper, forward, shape)
            self._planned = shape
        paged_kv = (hnd_pages_view(k_cache, forward.page_size), hnd_pages_view(v_cache, forward.page_size))
        out: torch.Tensor = wrapper.run(q, paged_kv)
        return out

    def _start_on(self, device: torch.device) -> None:
        """Allocate the workspace and the wrappers on `device` (they hold device buffers from construction)."""
        # Zeroed: the decode wrapper requires a zero-initialised workspace on its first use.
        self._workspace = torch.zeros(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        # One workspace serves both wrappers: a forward runs only one of them.
        self._prefill = self._flashinfer.BatchPrefillWithPagedKVCacheWrapper(self._workspace, "HND")
        self._decode = {}
        self._device = device

    def _decode_wrapper(self, shape: KernelShape) -> Any:
        """The decode wrapper for this head grouping, built on first use."""
        tensor_cores = shape.heads // shape.kv_heads not in CUDA_CORE_DECODE_GROUPS
        if tensor_cores not in self._decode:
            self._decode[tensor_cores] = self._flashinfer.BatchDecodeWithPagedKVCacheWrapper(
                self._workspace, "HND", use_tensor_cores=tensor_cores
            )
        return self._decode[tensor_cores]

    def _plan_wrapper(self, wrapper: Any, forward: ForwardPlan, shape: KernelShape) -> None:
        """flashinfer's plan for this forward and kernel shape."""
        csr = forward.csr
        dims = (shape.heads, shape.kv_heads, shape.head_dim, forward.page_size)
        types = {"q_data_type": shape.q_dtype, "kv_data_type": shape.kv_dtype, "sm_scale": shape.scale}
        if forward.all_decode:
            wrapper.plan(csr.kv_indptr, csr.kv_indices, csr.kv_last_page_len, *dims, **types)
        else:
            wrapper.plan(
                csr.qo_indptr, csr.kv_indptr, csr.kv_indices, csr.kv_last_page_len, *dims, causal=True, **types
            )


def _require_cuda(device: torch.device) -> None:
    if device.type != "cuda":
        raise RuntimeError("flashinfer runs on CUDA devices only; on a CPU use torch_native or cpu_paged")
