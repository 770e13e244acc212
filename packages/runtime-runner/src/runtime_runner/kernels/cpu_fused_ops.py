"""The decoder's elementwise ops on a CPU as one C++ pass each (cpu_fused_ops.cpp).

Eagerly, torch runs an RMSNorm on bf16 as about nine ops (widen, square, mean, add, rsqrt, two
multiplies, two narrowings), each a pass over the rows and a hand-off between OpenMP threads; at
batch-32 decode those small ops cost more than their arithmetic. Here the residual add + RMSNorm,
SiLU-and-mul and the rotary embedding are each one pass that rounds where eager torch rounds, in
transformers' op order. The source is compiled on first use (native_build) into
~/.cache/runtime-runner, like attn-backends' kernel.

runtime_runner.models' `norm`, `mlp_activation` and `rope` route a tensor here when `handles` says
so and keep their torch form otherwise: on other devices, for other dtypes, and under
torch.compile, whose inductor fuses the torch form itself.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

from native_build import load_library
from runtime_runner.kernels.native_projection import address_of

WHAT = "the runner's fused CPU ops"
SOURCE = Path(__file__).with_name("cpu_fused_ops.cpp")
# No contraction of a*b + c*d into one fused multiply-add: eager torch rounds the product first.
# Full-width vectors where the CPU has AVX-512 (GCC otherwise keeps its loops at 256 bits there):
# every op is elementwise or sums in explicit lanes, so the width changes no bit, only the time.
FLAGS = (
    "-O3",
    "-march=native",
    "-mprefer-vector-width=512",
    "-ffp-contract=off",
    "-fopenmp",
    "-shared",
    "-fPIC",
    "-std=c++17",
)
_SUFFIX_OF_DTYPE = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


@functools.cache
def _library() -> ctypes.CDLL:
    """The ops, loaded once per process (built first on a machine that never had them)."""
    library = load_library(SOURCE, FLAGS, package="runtime-runner", what=WHAT)
    i64, pointer = ctypes.c_int64, ctypes.c_void_p
    for suffix in _SUFFIX_OF_DTYPE.values():
        norm = getattr(library, f"add_rms_norm_{suffix}")
        norm.argtypes = [
            pointer,
            i64,
            i64,
            pointer,
            i64,
            i64,
            pointer,
            pointer,
            pointer,
            i64,
            i64,
            i64,
            ctypes.c_double,
            i64,
        ]
        getattr(library, f"silu_mul_{suffix}").argtypes = [pointer, i64, pointer, i64, i64, i64]
        getattr(library, f"rope_{suffix}").argtypes = [pointer, i64, i64, pointer, pointer, i64, i64, i64, i64, i64]
        for op in ("add_rms_norm", "silu_mul", "rope"):
            getattr(library, f"{op}_{suffix}").restype = None
    return library


def handles(*tensors: torch.Tensor) -> bool:
    """Whether these tensors take the C++ path: CPU, one dtype it has code for, and not being traced."""
    first = tensors[0]
    return (
        first.device.type == "cpu"
        and first.dtype in _SUFFIX_OF_DTYPE
        and not torch.compiler.is_compiling()
        and all(t.device.type == "cpu" and t.dtype == first.dtype for t in tensors)
    )


def _two_level(x: torch.Tensor, what: str) -> tuple[int, int, int, int]:
    """(outer, inner, outer stride, inner stride) of x's rows: x is [outer, cols] or [outer, inner, cols]."""
    if x.dim() not in (2, 3) or x.stride(-1) != 1:
        raise ValueError(
            f"{what} takes [rows, cols] or [rows, heads, cols] with unit stride along cols; got "
            f"shape {tuple(x.shape)}, strides {x.stride()}"
        )
    if x.dim() == 2:
        return x.shape[0], 1, x.stride(0), 0
    return x.shape[0], x.shape[1], x.stride(0), x.stride(1)


def add_rms_norm(
    x: torch.Tensor, delta: torch.Tensor | None, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(s, weight * s / rms(s)) with s = x + delta, contiguous (s is x itself when delta is None)."""
    cols = x.shape[-1]
    if weight.shape != (cols,) or not weight.is_contiguous() or (delta is not None and delta.shape != x.shape):
        raise ValueError(
            f"add_rms_norm takes a contiguous weight [{cols}] and a delta shaped like x {tuple(x.shape)}; "
            f"got weight {tuple(weight.shape)}, delta "
            f"{None if delta is None else tuple(delta.shape)}"
        )
    outer, inner, x_outer, x_inner = _two_level(x, "add_rms_norm")
    out = torch.empty(x.shape, dtype=x.dtype)
    if delta is None:
        summed, d_ptr, d_outer, d_inner = x, None, 0, 0
    else:
        _, _, d_outer, d_inner = _two_level(delta, "add_rms_norm's delta")
        summed, d_ptr = torch.empty(x.shape, dtype=x.dtype), delta.data_ptr()
    getattr(_library(), f"add_rms_norm_{_SUFFIX_OF_DTYPE[x.dtype]}")(
        x.data_ptr(),
        x_outer,
        x_inner,
        d_ptr,
        d_outer,
        d_inner,
        weight.data_ptr(),
        summed.data_ptr() if delta is not None else None,
        out.data_ptr(),
        outer,
        inner,
        cols,
        eps,
        torch.get_num_threads(),
    )
    return summed, out


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up of rows [gate | up] of gate_up [rows, 2 * inter] -> [rows, inter], contiguous."""
    if gate_up.dim() != 2 or gate_up.stride(1) != 1 or gate_up.shape[1] % 2:
        raise ValueError(
            f"silu_mul takes [rows, 2 * inter] with unit stride along a row; got shape {tuple(gate_up.shape)}, "
            f"strides {gate_up.stride()}"
        )
    rows, inter = gate_up.shape[0], gate_up.shape[1] // 2
    out = torch.empty(rows, inter, dtype=gate_up.dtype)
    getattr(_library(), f"silu_mul_{_SUFFIX_OF_DTYPE[gate_up.dtype]}")(
        gate_up.data_ptr(), gate_up.stride(0), out.data_ptr(), rows, inter, torch.get_num_threads()
    )
    return out


def rope_(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [tokens, heads, head_dim] in place by each token's row of cos / signed_sin [tokens, head_dim]; x."""
    tokens, heads, x_outer, x_inner = _two_level(x, "rope_")
    head_dim = x.shape[-1]
    if (
        x.dim() != 3
        or cos.shape != (tokens, head_dim)
        or signed_sin.shape != cos.shape
        or cos.stride() != signed_sin.stride()
        or cos.stride(1) != 1
        or head_dim % 2
    ):
        raise ValueError(
            f"rope_ takes x [tokens, heads, head_dim] (head_dim even) and alike "
            f"tables [tokens, head_dim] with unit stride along a row; got x {tuple(x.shape)}, cos "
            f"{tuple(cos.shape)}, signed_sin {tuple(signed_sin.shape)}"
        )
    getattr(_library(), f"rope_{_SUFFIX_OF_DTYPE[x.dtype]}")(
        x.data_ptr(),
        x_outer,
        x_inner,
        cos.data_ptr(),
        signed_sin.data_ptr(),
        cos.stride(0),
        tokens,
        heads,
        head_dim,
        torch.get_num_threads(),
    )
    return x


def native_entries(dtype: torch.dtype) -> tuple[int, int, int]:
    """The C entries' addresses (add_rms_norm, silu_mul, rope) for `dtype`, for a caller in C++ (the
    native step), which then computes exactly what the functions above compute."""
    if dtype not in _SUFFIX_OF_DTYPE:
        raise ValueError(f"the fused CPU ops take one dtype among {sorted(map(str, _SUFFIX_OF_DTYPE))}; got {dtype}")
    library, suffix = _library(), _SUFFIX_OF_DTYPE[dtype]
    norm, silu, rope = (getattr(library, f"{op}_{suffix}") for op in ("add_rms_norm", "silu_mul", "rope"))
    return address_of(norm), address_of(silu), address_of(rope)
