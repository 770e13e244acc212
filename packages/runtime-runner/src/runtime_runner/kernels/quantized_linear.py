"""A CPU linear layer over a weight kept quantized in memory (GGUF's blocks: Q8_0, Q4_0, Q4_1,
Q5_0, Q5_1, IQ4_NL and the K-quants Q2_K..Q6_K; or per-channel int8), batch-invariant as
InvariantLinear is.

The kernel (quantized_linear.cpp, the formats in quantized_blocks.h) de-quantizes each weight
exactly as `QuantizedTensor.dequantize` does, in fp32, in registers or a cache-sized scratch (never
a dense copy in memory), and accumulates every output element as one fp32 chain of fused
multiply-adds over k in increasing order; the bias is added in fp32 and the sum rounded once to the
activation dtype. A row of the output is therefore bitwise the batch-invariant fp32 linear of the
de-quantized matrix: a function of its input row alone, whatever the batch, the row's position or
the thread count.

`QuantizedLinear.of` reorders the quantized bytes once into panels of 16 rows (the kernel's layout:
the 16 rows' blocks side by side, each value plane in value order, or in quads for the integer rule;
the same number of bytes) and keeps only those. Packed with `activations="int8"`
(exec.kernel.quantized_activations), a GGUF matrix runs the integer rule (integer_linear.h): each
input row quantized to int8 per 32 values (activation_blocks.h), exact integer dot products
against the blocks' integers (weight_quads.h), scaled once per run in fp32, as llama.cpp computes;
a row still depends on itself alone, so it stays batch-invariant, but it is no longer bitwise the
de-quantized matrix's product.
Both `__call__` and the whole-step C++ forward run the one C entry that `native`
names (runtime_runner.kernels.native_projection's ABI), so the two give the same bits. The same
panels serve a tied token embedding (quantized_embedding).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Literal

import torch
import torch.nn.functional as F

from native_build import TIERS, CpuTier, detected_tier, load_library, tier_flags, tier_runs_here
from runtime_runner.kernels.native_projection import NativeProjectionEntry, address_of
from runtime_runner.kernels.quantized_tensor import BLOCKS, QuantizedTensor, QuantKind

WHAT = "the runner's quantized linear"
SOURCE = Path(__file__).with_name("quantized_linear.cpp")
# No contraction: the kernel's only fused multiply-adds are the explicit ones of the chain.
FLAGS = ("-O3", "-ffp-contract=off", "-fopenmp", "-shared", "-fPIC", "-std=c++17")
PANEL = 16  # weight rows (output columns) per panel
ACTIVATION_DTYPES: MappingProxyType[torch.dtype, str] = MappingProxyType(
    {torch.float32: "float32", torch.bfloat16: "bfloat16"}
)
# quantized_blocks.h's Kind codes.
_KIND_CODE: MappingProxyType[str, int] = MappingProxyType(
    {
        "q8_0": 0,
        "q4_0": 1,
        "q4_1": 2,
        "int8": 3,
        "q5_0": 4,
        "q5_1": 5,
        "iq4_nl": 6,
        "q2_k": 7,
        "q3_k": 8,
        "q4_k": 9,
        "q5_k": 10,
        "q6_k": 11,
    }
)


@dataclass(frozen=True)
class _Plane:
    """`bits` bits of each of a block's values, and where ggml keeps value v's: at bit shift(v) of
    byte byte(v) of a row's block (both functions of an array of v)."""

    bits: int
    byte: Callable[[torch.Tensor], torch.Tensor]
    shift: Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class _Format:
    """A GGUF kind's block as ggml lays it out: the byte offsets of its fp16 fields (d, then m or
    dmin), of its sub-block scale bytes and their count, and its value planes (low, then high)."""

    halves: tuple[int, ...]
    scales: tuple[int, int]
    planes: tuple[_Plane, ...]


def _nibbles(start: int) -> _Plane:
    """A 32-value block's 16 bytes of nibbles at `start`: value v in byte v % 16, high for v >= 16."""
    return _Plane(4, lambda v: start + v % 16, lambda v: 4 * (v // 16))


def _fifths(start: int) -> _Plane:
    """q5_0/q5_1's 32 fifth bits (a little-endian uint32 at `start`): value v's at bit v."""
    return _Plane(1, lambda v: start + v // 8, lambda v: v % 8)


def _crumbs(start: int) -> _Plane:
    """Q2_K/Q3_K's 64 bytes of 2-bit values: value 128 h + 32 g + l at bits 2 g of byte 32 h + l."""
    return _Plane(2, lambda v: start + 32 * (v // 128) + v % 32, lambda v: 2 * (v % 128 // 32))


def _super_nibbles(start: int) -> _Plane:
    """Q4_K/Q5_K's 128 bytes of nibbles: value 64 j + 32 n + l in byte 32 j + l, high when n = 1."""
    return _Plane(4, lambda v: start + 32 * (v // 64) + v % 32, lambda v: 4 * (v // 32 % 2))


def _bits_by_run(start: int) -> _Plane:
    """Q3_K's and Q5_K's 32 bytes of one bit per value: value 32 c + l at bit c of byte l."""
    return _Plane(1, lambda v: start + v % 32, lambda v: v // 32)


# Each GGUF kind's block, as ggml-common.h lays it out (read there, described here).
_FORMATS: MappingProxyType[str, _Format] = MappingProxyType(
    {
        "q8_0": _Format((0,), (0, 0), (_Plane(8, lambda v: 2 + v, lambda v: 0 * v),)),
        "q4_0": _Format((0,), (0, 0), (_nibbles(2),)),
        "q4_1": _Format((0, 2), (0, 0), (_nibbles(4),)),
        "q5_0": _Format((0,), (0, 0), (_nibbles(6), _fifths(2))),
        "q5_1": _Format((0, 2), (0, 0), (_nibbles(8), _fifths(4))),
        "iq4_nl": _Format((0,), (0, 0), (_nibbles(2),)),
        "q2_k": _Format((80, 82), (0, 16), (_crumbs(16),)),
        "q3_k": _Format((108,), (96, 12), (_crumbs(32), _bits_by_run(0))),
        "q4_k": _Format((0, 2), (4, 12), (_super_nibbles(16),)),
        "q5_k": _Format((0, 2), (4, 12), (_super_nibbles(48), _bits_by_run(16))),
        # ql: value 128 h + 32 g + l's low nibble in byte 64 h + 32 (g % 2) + l, high when g >= 2;
        # qh: its top two bits at 2 g of byte 128 + 32 h + l.
        "q6_k": _Format(
            (208,),
            (192, 16),
            (
                _Plane(4, lambda v: 64 * (v // 128) + 32 * (v % 64 // 32) + v % 32, lambda v: 4 * (v % 128 // 64)),
                _crumbs(128),
            ),
        ),
    }
)

_BIAS_DTYPES = (torch.float32, torch.bfloat16, torch.float16)

# How a layer reads its activations: quantized_blocks.h's Activations codes.
QuantizedActivations = Literal["float32", "int8"]
_ACTIVATIONS_CODE: MappingProxyType[str, int] = MappingProxyType({"float32": 0, "int8": 1})


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
        ("activations", ctypes.c_int64),
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
    library.quantized_linear_tier.argtypes = []
    library.quantized_linear_tier.restype = ctypes.c_int
    return library


def flags_of(tier: CpuTier | None) -> tuple[str, ...]:
    """The build's compiler flags for `tier` (None: a CPU below avx2, built as -march=native gives it)."""
    return (*(("-march=native",) if tier is None else tier_flags(tier)), *FLAGS)


@functools.cache
def library(tier: CpuTier | None = None) -> ctypes.CDLL:
    """The kernel built for `tier` (native_build.cpu_tiers; None: the highest this CPU runs),
    loaded once per process and tier (built first on a machine that never had it). ValueError for
    a tier this CPU cannot run, or a build that does not run the tier it was built for."""
    if tier is None:
        tier = detected_tier()
    elif not tier_runs_here(tier):
        raise ValueError(
            f"the quantized kernels cannot run the {tier} tier on this CPU, whose highest is {detected_tier()}"
        )
    built = bind(load_library(SOURCE, flags_of(tier), package="runtime-runner", what=f"{WHAT} ({tier or 'portable'})"))
    runs = built.quantized_linear_tier()
    if tier is not None and runs != TIERS.index(tier) + 1:
        raise ValueError(
            f"{WHAT} was built for the {tier} tier but runs tier {runs} (0 portable, 1 avx2, 2 avx512, 3 amx)"
        )
    return built


def _bytes_of(parts: torch.Tensor, bits: int) -> torch.Tensor:
    """Bytes from parts [..., fields] of `bits` bits each: field i at bit i * bits."""
    packed = parts[..., 0].clone()
    for i in range(1, parts.shape[-1]):
        packed |= parts[..., i] << (i * bits)
    return packed


def pack_panels(
    weight: QuantizedTensor, activations: QuantizedActivations = "float32"
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`weight`'s bytes in the kernel's layout (quantized_blocks.h's THE LAYOUT, its planes in
    value order, or in quads for the integer rule when `activations` is int8), rows padded with
    zero rows to a multiple of 16, and for int8 its scales fp32 [16 * panels] (zero-padded)."""
    n, k = weight.shape
    panels = -(-n // PANEL)
    rows = F.pad(weight.data, (0, 0, 0, panels * PANEL - n))
    if weight.kind == "int8":
        assert weight.scales is not None
        scales = F.pad(weight.scales, (0, panels * PANEL - n)).contiguous()
        return rows.view(panels, PANEL, k).transpose(1, 2).contiguous(), scales
    values, block_bytes = BLOCKS[weight.kind]
    form = _FORMATS[weight.kind]
    tiled = rows.view(panels, PANEL, k // values, block_bytes)

    def side_by_side(units: torch.Tensor) -> torch.Tensor:
        """[panel, 16 rows, block, units] as [panel, block, units * 16]: each unit's 16 rows together."""
        return units.permute(0, 2, 3, 1).reshape(panels, k // values, -1)

    fields = [tiled[..., at : at + 2].permute(0, 2, 1, 3).reshape(panels, k // values, -1) for at in form.halves]
    at, count = form.scales
    fields.append(side_by_side(tiled[..., at : at + count]))
    v = torch.arange(values)
    for plane in form.planes:
        parts = (tiled[..., plane.byte(v)] >> plane.shift(v).to(torch.uint8)) & ((1 << plane.bits) - 1)
        per_byte = 8 // plane.bits
        if activations == "int8":
            # In quads: chunks of 4 * per_byte values; a chunk's byte 4 c + t holds, for row c, its
            # values 4 f + t at bits f * bits (f < per_byte).
            chunks = parts.view(panels, PANEL, k // values, values // (4 * per_byte), per_byte, 4)
            packed = _bytes_of(chunks.transpose(-1, -2), plane.bits)
            fields.append(packed.permute(0, 2, 3, 1, 4).reshape(panels, k // values, -1))
        else:
            grouped = parts.view(panels, PANEL, k // values, values // per_byte, per_byte)
            fields.append(side_by_side(_bytes_of(grouped, plane.bits)))
    packed_blocks = torch.cat(fields, dim=2)
    assert packed_blocks.shape[2] == PANEL * block_bytes, (weight.kind, packed_blocks.shape)
    return packed_blocks.contiguous(), None


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
    activations: QuantizedActivations
    tier: CpuTier | None  # the instruction tier its kernel was built for (None: below avx2)
    packed: torch.Tensor  # pack_panels' bytes: the only copy of the weight this object holds
    scales: torch.Tensor | None  # int8: fp32 [16 * panels]
    bias32: torch.Tensor | None  # fp32 [16 * panels]
    matrix: Matrix  # the descriptor of the three above, which this object keeps alive

    @classmethod
    def of(
        cls,
        weight: QuantizedTensor,
        bias: torch.Tensor | None,
        activation_dtype: torch.dtype,
        activations: QuantizedActivations = "float32",
        tier: CpuTier | None = None,
    ) -> QuantizedLinear:
        """`weight` packed for the kernel, with an optional `bias` [N] (a CPU float32, bfloat16 or
        float16 vector), for activations of `activation_dtype` (float32 or bfloat16), read as
        `activations`: float32 (the kernel's rule: bitwise the de-quantized matrix's fp32 linear) or
        int8 (its integer rule: x quantized per 32 values, exact integer dot products; a GGUF kind
        on an AVX2 CPU), by the kernel built for `tier` (native_build.cpu_tiers; None: the highest
        this CPU runs; every tier gives the same bits). ValueError for anything else."""
        if not isinstance(weight, QuantizedTensor):
            raise ValueError(
                f"QuantizedLinear takes a QuantizedTensor (a GGUF kind or int8); got {type(weight).__name__}"
            )
        if activation_dtype not in ACTIVATION_DTYPES:
            raise ValueError(f"QuantizedLinear takes float32 or bfloat16 activations; got {activation_dtype}")
        if weight.data.device.type != "cpu":
            raise ValueError(f"QuantizedLinear runs on a CPU; the weight is on {weight.data.device}")
        if activations not in _ACTIVATIONS_CODE:
            raise ValueError(f"QuantizedLinear reads activations as float32 or int8; got {activations!r}")
        tier = detected_tier() if tier is None else tier
        if activations == "int8" and (weight.kind == "int8" or not library(tier).quantized_linear_has_avx2()):
            raise ValueError(
                "int8 activations run on a GGUF kind's blocks on an AVX2 CPU; this is "
                + ("a per-channel int8 weight" if weight.kind == "int8" else "a CPU without AVX2")
            )
        n, k = weight.shape
        packed, scales = pack_panels(weight, activations)
        bias32 = _checked_bias(bias, n, -(-n // PANEL))
        matrix = Matrix(
            _KIND_CODE[weight.kind],
            n,
            k,
            -(-n // PANEL),
            packed.data_ptr(),
            None if scales is None else scales.data_ptr(),
            None if bias32 is None else bias32.data_ptr(),
            _ACTIVATIONS_CODE[activations],
        )
        return cls(weight.kind, (n, k), activation_dtype, activations, tier, packed, scales, bias32, matrix)

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
        entry = address_of(getattr(library(self.tier), f"quantized_linear_{self.suffix}"))
        return NativeProjectionEntry(
            entry, ctypes.addressof(self.matrix), self.in_features, self.out_features, self.activation_dtype.itemsize
        )

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
            getattr(library(self.tier), f"quantized_linear_{self.suffix}")(
                ctypes.addressof(self.matrix),
                x.data_ptr(),
                x.stride(0),
                x.shape[0],
                out.data_ptr(),
                torch.get_num_threads(),
            )
        return out
