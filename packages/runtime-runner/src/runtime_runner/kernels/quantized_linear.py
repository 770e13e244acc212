"""A CPU linear layer over a weight kept quantized in memory (GGUF Q8_0 / Q4_0 / Q4_1 blocks, or
per-channel int8), batch-invariant as InvariantLinear is.

The kernel (quantized_linear.cpp) de-quantizes each weight exactly as `QuantizedTensor.dequantize`
does, in fp32, in registers or a cache-sized scratch (never a dense copy in memory), and
accumulates every output element as one fp32 chain of fused multiply-adds over k in increasing
order; the bias is added in fp32 and the sum rounded once to the activation dtype. A row of the
output is therefore bitwise the batch-invariant fp32 linear of the de-quantized matrix: a function
of its input row alone, whatever the batch, the row's position or the thread count.

`QuantizedLinear.of` reorders the quantized bytes once into panels of 16 rows (the kernel's
layout; the same number of bytes) and keeps only those. Both `__call__` and the whole-step C++
forward run the one C entry that `native` names (runtime_runner.kernels.native_projection's ABI), so the
two give the same bits. The same panels serve a tied token embedding (quantized_embedding).
"""

from __future__ import annotations

import ctypes
import functools
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import torch
import torch.nn.functional as F

from native_build import load_library
from runtime_runner.kernels.native_projection import NativeProjectionEntry, address_of
from runtime_runner.kernels.quantized_tensor import BLOCK, BLOCK_BYTES, QuantizedTensor, QuantKind

WHAT = "the runner's quantized linear"
SOURCE = Path(__file__).with_name("quantized_linear.cpp")
# No contraction: the kernel's only fused multiply-adds are the explicit ones of the chain.
FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fopenmp", "-shared", "-fPIC", "-std=c++17")
PANEL = 16  # weight rows (output columns) per panel
ACTIVATION_DTYPES: MappingProxyType[torch.dtype, str] = MappingProxyType(
    {torch.float32: "float32", torch.bfloat16: "bfloat16"}
)
_KIND_CODE: MappingProxyType[str, int] = MappingProxyType({"q8_0": 0, "q4_0": 1, "q4_1": 2, "int8": 3})
# Bytes of a GGUF block's header per row: the fp16 scale d, and q4_1's fp16 minimum m.
_HEADER_BYTES: MappingProxyType[str, int] = MappingProxyType({"q8_0": 2, "q4_0": 2, "q4_1": 4})
_BIAS_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


class Matrix(ctypes.Structure):
    """The kernel's descriptor of one packed matrix (quantized_linear.cpp's `Matrix`)."""

    _fields_ = [
        ("kind", ctypes.c_int64),
        ("n", ctypes.c_int64),
        ("k", ctypes.c_int64),
        ("panels", ctypes.c_int64),
        ("data", ctypes.c_void_p),
        ("scales", ctypes.c_void_p),
        ("bias", ctypes.c_void_p),
    ]


def bind(library: ctypes.CDLL) -> ctypes.CDLL:
    """`library` (a build of SOURCE) with its entry points' C signatures set."""
    i64, pointer = ctypes.c_int64, ctypes.c_void_p
    for suffix in ACTIVATION_DTYPES.values():
        linear = getattr(library, f"quantized_linear_{suffix}")
        linear.argtypes = [pointer, pointer, i64, i64, pointer, i64]
        linear.restype = None
        rows = getattr(library, f"quantized_rows_{suffix}")
        rows.argtypes = [pointer, pointer, i64, pointer]
        rows.restype = None
    library.quantized_linear_has_avx2.argtypes = []
    library.quantized_linear_has_avx2.restype = ctypes.c_int
    return library


@functools.cache
def library() -> ctypes.CDLL:
    """The kernel, loaded once per process (built first on a machine that never had it)."""
    return bind(load_library(SOURCE, FLAGS, package="runtime-runner", what=WHAT))


def pack_panels(weight: QuantizedTensor) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`weight`'s bytes in the kernel's layout (quantized_linear.cpp's header), rows padded with
    zero rows to a multiple of 16, and for int8 its scales fp32 [16 * panels] (zero-padded)."""
    n, k = weight.shape
    panels = -(-n // PANEL)
    rows = F.pad(weight.data, (0, 0, 0, panels * PANEL - n))
    if weight.kind == "int8":
        assert weight.scales is not None
        scales = F.pad(weight.scales, (0, panels * PANEL - n)).contiguous()
        return rows.view(panels, PANEL, k).transpose(1, 2).contiguous(), scales
    blocks, block_bytes, head = k // BLOCK, BLOCK_BYTES[weight.kind], _HEADER_BYTES[weight.kind]
    tiled = rows.view(panels, PANEL, blocks, block_bytes)
    values = tiled[..., head:]
    if weight.kind != "q8_0":
        values = _nibbles_in_pairs(values)
    # Header: [panel, block, d|m, 16 rows, 2 bytes]; values: [panel, block, byte, 16 rows].
    header = tiled[..., :head].reshape(panels, PANEL, blocks, head // 2, 2).permute(0, 2, 3, 1, 4)
    packed = torch.cat(
        [header.reshape(panels, blocks, -1), values.permute(0, 2, 3, 1).reshape(panels, blocks, -1)], dim=2
    )
    return packed.contiguous(), None


def _nibbles_in_pairs(packed: torch.Tensor) -> torch.Tensor:
    """GGUF's 16 nibble bytes of a block (byte j: value j low, value j + 16 high) as the kernel's
    (byte j: value 2j low, value 2j + 1 high), so that one load serves two neighbouring k."""
    values = torch.cat([packed & 0x0F, packed >> 4], dim=-1)  # values 0..31 in order
    return values[..., 0::2] | (values[..., 1::2] << 4)


def _checked_bias(bias: torch.Tensor | None, n: int, panels: int) -> torch.Tensor | None:
    """The bias widened to fp32 and zero-padded to 16 * panels (the kernel's only copy)."""
    if bias is None:
        return None
    if bias.device.type != "cpu" or bias.dtype not in _BIAS_DTYPES or tuple(bias.shape) != (n,):
        raise ValueError(
            f"QuantizedLinear takes a CPU bias [{n}] of float32, bfloat16 or float16; got shape "
            f"{tuple(bias.shape)}, dtype {bias.dtype}, device {bias.device}"
        )
    return F.pad(bias.detach().float(), (0, panels * PANEL - n)).contiguous()


@dataclass(frozen=True, eq=False)
class QuantizedLinear:
    """y = x @ W.T + bias over rows x [rows, in_features] for a quantized W (see the module)."""

    kind: QuantKind
    shape: tuple[int, int]  # (out_features, in_features)
    activation_dtype: torch.dtype
    packed: torch.Tensor  # pack_panels' bytes: the only copy of the weight this object holds
    scales: torch.Tensor | None  # int8: fp32 [16 * panels]
    bias32: torch.Tensor | None  # fp32 [16 * panels]
    matrix: Matrix  # the descriptor of the three above, which this object keeps alive

    @classmethod
    def of(cls, weight: QuantizedTensor, bias: torch.Tensor | None, activation_dtype: torch.dtype) -> QuantizedLinear:
        """`weight` packed for the kernel, with an optional `bias` [N] (a CPU float32, bfloat16 or
        float16 vector), for activations of `activation_dtype` (float32 or bfloat16). ValueError
        for anything else."""
        if not isinstance(weight, QuantizedTensor):
            raise ValueError(
                f"QuantizedLinear takes a QuantizedTensor (q8_0, q4_0, q4_1 or int8); got {type(weight).__name__}"
            )
        if activation_dtype not in ACTIVATION_DTYPES:
            raise ValueError(f"QuantizedLinear takes float32 or bfloat16 activations; got {activation_dtype}")
        if weight.data.device.type != "cpu":
            raise ValueError(f"QuantizedLinear runs on a CPU; the weight is on {weight.data.device}")
        n, k = weight.shape
        packed, scales = pack_panels(weight)
        bias32 = _checked_bias(bias, n, -(-n // PANEL))
        matrix = Matrix(
            _KIND_CODE[weight.kind],
            n,
            k,
            -(-n // PANEL),
            packed.data_ptr(),
            None if scales is None else scales.data_ptr(),
            None if bias32 is None else bias32.data_ptr(),
        )
        return cls(weight.kind, (n, k), activation_dtype, packed, scales, bias32, matrix)

    @property
    def out_features(self) -> int:
        """N, the number of output columns."""
        return self.shape[0]

    @property
    def in_features(self) -> int:
        """K, the length of an input row."""
        return self.shape[1]

    @property
    def suffix(self) -> str:
        """The C entries' suffix for this layer's activation dtype."""
        return ACTIVATION_DTYPES[self.activation_dtype]

    @property
    def native(self) -> NativeProjectionEntry:
        """The C entry for this activation dtype and this layer's descriptor (native_projection)."""
        entry = address_of(getattr(library(), f"quantized_linear_{self.suffix}"))
        return NativeProjectionEntry(entry, ctypes.addressof(self.matrix), self.in_features, self.out_features)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """The projection of rows x [M, in_features] (CPU, the activation dtype, unit stride along a
        row): a new contiguous [M, out_features] of that dtype. ValueError for anything else."""
        if x.device.type != "cpu" or x.dtype != self.activation_dtype or x.dim() != 2 or x.shape[1] != self.in_features:
            raise ValueError(
                f"QuantizedLinear ({self.kind} {self.shape}, {self.activation_dtype} activations) takes CPU "
                f"rows [M, {self.in_features}] of {self.activation_dtype}; got shape {tuple(x.shape)}, "
                f"dtype {x.dtype}, device {x.device}"
            )
        if x.stride(1) != 1 and x.shape[1] > 1:
            raise ValueError(f"QuantizedLinear takes rows with unit stride along in_features; got strides {x.stride()}")
        out = torch.empty(x.shape[0], self.out_features, dtype=x.dtype)
        if x.shape[0] > 0:
            getattr(library(), f"quantized_linear_{self.suffix}")(
                ctypes.addressof(self.matrix),
                x.data_ptr(),
                x.stride(0),
                x.shape[0],
                out.data_ptr(),
                torch.get_num_threads(),
            )
        return out
