"""A CPU linear layer whose every output row depends only on its own input row: batch-invariant.

The server must answer a request bit for bit the same however it was batched. oneDNN / aten's
matmul picks its kernel and blocking by the number of rows (and may split the reduction over K),
so row i of `F.linear(x, W)` can change with how many other rows share the call. Here
(batch_invariant_linear.cpp) each output element is one fp32 chain of fused multiply-adds over
k = 0..K-1 in increasing order, then the bias is added and the sum rounded to the output dtype;
vectorization runs across output columns and reuse across rows, never across k. Every
micro-kernel shape, tail and thread split runs that same chain, so row i of the result is a
function of x[i], W and b alone: bitwise the same for one row or many, at any row position, on
any number of threads. On AVX2 it is also faster than aten's bf16 matmul on this class of CPU
(tools/bench_linear.py measures it). On a CPU with AMX tiles, bf16 weights whose K is a multiple of
32 run a chain of tile dot products instead (per k block of 32, in increasing order): as
batch-invariant, not bitwise the fp32 chain, and near the speed of oneDNN's AMX matmul for prompts
(`amx_layout` tells which layout a K gets; pack_panels packs for it).

The weight is prepacked once, at load, into column panels of 16 (`InvariantLinear.of`), and only
the panels are kept: the decoder then drops the loaded matrix (DecoderWeights.released), so a
served model holds each projection once.
It runs eagerly only: deterministic inference refuses the compiled decode step, whose fused graph
rounds its norms otherwise than a batch does (runtime_runner.determinism).
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from pathlib import Path

import torch

from native_build import load_library
from runtime_runner.kernels.native_projection import NativeProjectionEntry, address_of

WHAT = "the runner's batch-invariant linear"
SOURCE = Path(__file__).with_name("batch_invariant_linear.cpp")
# No contraction: the kernel's only fused multiply-adds are the explicit ones of the chain.
FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fopenmp", "-shared", "-fPIC", "-std=c++17")
PANEL = 16  # output columns per weight panel
_SUFFIX_OF_DTYPE = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}
# A bf16 panel row holds its 16 columns as 0, 8, 1, 9, ..., 7, 15 (so a 32-bit lane pairs column l with l + 8).
_BF16_SLOTS = [c for pair in zip(range(8), range(8, 16), strict=True) for c in pair]


def bind(library: ctypes.CDLL) -> ctypes.CDLL:
    """`library` (a build of SOURCE) with its entry points' C signatures set."""
    i64, pointer = ctypes.c_int64, ctypes.c_void_p
    for suffix in _SUFFIX_OF_DTYPE.values():
        entry = getattr(library, f"batch_invariant_linear_{suffix}")
        entry.argtypes = [pointer, i64, i64, i64, pointer, i64, pointer, pointer, i64, i64]
        entry.restype = None
        native = getattr(library, f"batch_invariant_linear_native_{suffix}")
        native.argtypes = [pointer, pointer, i64, i64, pointer, i64]
        native.restype = None
    library.batch_invariant_linear_has_avx2.argtypes = []
    library.batch_invariant_linear_has_avx2.restype = ctypes.c_int
    library.batch_invariant_linear_bf16_amx_layout.argtypes = [i64]
    library.batch_invariant_linear_bf16_amx_layout.restype = ctypes.c_int
    return library


@functools.cache
def _library() -> ctypes.CDLL:
    """The kernel, loaded once per process (built first on a machine that never had it)."""
    return bind(load_library(SOURCE, FLAGS, package="runtime-runner", what=WHAT))


def amx_layout(k: int, library: ctypes.CDLL | None = None) -> bool:
    """Whether `library` (by default this process's build) runs bf16 weights of `k` columns on AMX
    tiles, whose panels pack k pairs side by side (batch_invariant_linear.cpp's header)."""
    return bool((library or _library()).batch_invariant_linear_bf16_amx_layout(k))


def pack_panels(weight: torch.Tensor, library: ctypes.CDLL | None = None) -> torch.Tensor:
    """weight [N, K] as the kernel's column panels [ceil(N / 16), K, 16] in its own dtype: panel p
    holds columns 16p..16p+15 (zero columns past N); bf16 rows in the kernel's interleaved order,
    or, where `library` runs them on AMX tiles, as [K / 2][16][2] (each column's k pairs together)."""
    n, k = weight.shape
    panels = -(-n // PANEL)
    padded = weight.new_zeros(panels * PANEL, k)
    padded[:n] = weight
    if weight.dtype == torch.bfloat16 and amx_layout(k, library):
        return padded.view(panels, PANEL, k // 2, 2).permute(0, 2, 1, 3).contiguous().view(panels, k, PANEL)
    tiled = padded.view(panels, PANEL, k).transpose(1, 2)  # [P, K, 16]
    if weight.dtype == torch.bfloat16:
        tiled = tiled[:, :, _BF16_SLOTS]
    return tiled.contiguous()


def run(
    x: torch.Tensor, panels: torch.Tensor, bias32: torch.Tensor | None, n: int, library: ctypes.CDLL | None = None
) -> torch.Tensor:
    """The kernel (`library`, by default this process's build) on checked operands: x [M, K] with
    unit stride along K, panels of pack_panels, bias32 fp32 [16 * panels] or None -> contiguous
    [M, n] in x's dtype."""
    rows, k = x.shape
    out = torch.empty(rows, n, dtype=x.dtype)
    if rows == 0 or n == 0:
        return out
    getattr(library or _library(), f"batch_invariant_linear_{_SUFFIX_OF_DTYPE[x.dtype]}")(
        x.data_ptr(),
        x.stride(0),
        rows,
        k,
        panels.data_ptr(),
        panels.shape[0],
        None if bias32 is None else bias32.data_ptr(),
        out.data_ptr(),
        n,
        torch.get_num_threads(),
    )
    return out


class InvariantMatrix(ctypes.Structure):
    """The native entry's descriptor of one packed matrix (batch_invariant_linear.cpp's InvariantMatrix)."""

    _fields_ = [
        ("panels", ctypes.c_void_p),
        ("n_panels", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("n", ctypes.c_int64),
        ("bias", ctypes.c_void_p),
    ]


@dataclass(frozen=True)
class InvariantLinear:
    """y = x @ weight.T + bias over rows x [rows, in_features], batch-invariant (see the module)."""

    panels: torch.Tensor  # pack_panels(weight): [ceil(out / 16), in, 16], the weight's only copy here
    bias32: torch.Tensor | None  # the bias widened to fp32, zero-padded to 16 * panels (the kernel's only copy)
    out_features: int  # N, the number of output columns (the panels' last one may be padding)

    @classmethod
    def of(cls, weight: torch.Tensor, bias: torch.Tensor | None = None) -> InvariantLinear:
        """Pack `weight` [N, K] (a CPU fp32, bf16 or fp16 matrix; packed into a new copy, the weight
        itself left untouched and not held, so a caller that drops it keeps one copy) with an optional
        `bias` [N] of its dtype; ValueError for anything else."""
        if weight.device.type != "cpu":
            raise ValueError(f"InvariantLinear runs on a CPU; the weight is on {weight.device}")
        if weight.dtype not in _SUFFIX_OF_DTYPE:
            raise ValueError(f"InvariantLinear takes a float32, bfloat16 or float16 weight; got {weight.dtype}")
        if weight.dim() != 2:
            raise ValueError(f"InvariantLinear takes a 2-D weight [out, in]; got shape {tuple(weight.shape)}")
        if bias is not None and (
            bias.shape != (weight.shape[0],) or bias.dtype != weight.dtype or bias.device.type != "cpu"
        ):
            raise ValueError(
                f"InvariantLinear takes a CPU bias [{weight.shape[0]}] of the weight's dtype {weight.dtype}; "
                f"got shape {tuple(bias.shape)}, dtype {bias.dtype}, device {bias.device}"
            )
        panels = pack_panels(weight.detach())
        bias32 = None
        if bias is not None:
            bias32 = torch.zeros(panels.shape[0] * PANEL, dtype=torch.float32)
            bias32[: weight.shape[0]] = bias.detach().float()
        return cls(panels, bias32, int(weight.shape[0]))

    @property
    def in_features(self) -> int:
        """K, the length of an input row."""
        return int(self.panels.shape[1])

    @property
    def dtype(self) -> torch.dtype:
        """The weight's (and the rows') element type."""
        return self.panels.dtype

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """The projection of rows x [M, in_features] (CPU, the weight's dtype, unit stride along a
        row): a new contiguous [M, out_features] in x's dtype. ValueError for anything else."""
        if x.device.type != "cpu" or x.dtype != self.dtype or x.dim() != 2 or x.shape[1] != self.in_features:
            raise ValueError(
                f"InvariantLinear of a {self.dtype} weight {(self.out_features, self.in_features)} takes CPU rows "
                f"[M, {self.in_features}] of that dtype; got shape {tuple(x.shape)}, dtype {x.dtype}, "
                f"device {x.device}"
            )
        if x.stride(1) != 1 and x.shape[1] > 1:
            raise ValueError(f"InvariantLinear takes rows with unit stride along in_features; got strides {x.stride()}")
        if x.shape[0] == 0:
            return x.new_empty(0, self.out_features)
        return run(x, self.panels, self.bias32, self.out_features)

    @functools.cached_property
    def _descriptor(self) -> InvariantMatrix:
        return InvariantMatrix(
            self.panels.data_ptr(),
            self.panels.shape[0],
            self.in_features,
            self.out_features,
            None if self.bias32 is None else self.bias32.data_ptr(),
        )

    @property
    def native(self) -> NativeProjectionEntry:
        """This projection through the native projection ABI: the same kernel `__call__` runs."""
        entry = getattr(_library(), f"batch_invariant_linear_native_{_SUFFIX_OF_DTYPE[self.dtype]}")
        return NativeProjectionEntry(
            address_of(entry),
            ctypes.addressof(self._descriptor),
            self.in_features,
            self.out_features,
            self.dtype.itemsize,
        )
