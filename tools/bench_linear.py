"""The decoder's linear layers on a CPU: the batch-invariant kernel against torch's matmuls.

Shapes of the default model (SmolLM2-135M, hidden 576): qkv 960x576, o 576x576, gate_up 3072x576,
down 576x1536, lm_head 49152x576, at M rows per call (1: a one-request decode step; 32: a batch-32
decode step; 512: a prefill step under the CPU prefill budget). Three paths, alternating within
each repeat, best of `--repeats`:

  invariant  runtime_runner.kernels.batch_invariant_linear.InvariantLinear (row i depends on x[i] alone)
  F.linear   torch.nn.functional.linear on the plain weight (oneDNN / aten, blocking chosen by M)
  packed     PackedLinear's oneDNN-prepacked weight, where this torch build can pack the dtype

Figures: milliseconds per call, the speed-up of the invariant kernel over each (their time / its
time), and the largest |invariant - F.linear| (the two round differently, so not 0). The weights
stay hot in cache between calls, so one-row figures are a best case: a decode step reads ~30
layers' weights, far more than L3 holds.

A second table times QuantizedLinear (weights kept quantized, bf16 activations: every GGUF kind
served, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl and the K-quants q2_k..q6_k, and int8) beside the
bf16 invariant kernel on the same shapes: milliseconds, the speed-up (invariant's time / quantized
time), at one row the weight bytes each reads per second (GB/s; only lm_head's exceed L3, the
others are read from cache), and whether its output is bitwise the invariant fp32 linear of the
de-quantized matrix (its rule; "yes" expected). A K-quant runs only where a row is whole 256-value
super-blocks (down, 1536 wide; the other rows are 576): elsewhere its row says n/a, as
llama-quantize would store a substitute there. The kind `q4_k_m` is the qkv group as llama-quantize's
Q4_K_M stores it for this model in its more-bits layers: q and k rows Q5_0, v rows Q8_0, run
through the projection stack's native entry (what the native step calls; qkv only).

`--activations float32 int8` gives each GGUF kind a row per way of reading x: float32 (the rule
above) and int8 (the integer rule, exec.kernel.quantized_activations = int8; its bits column says
"integer rule", as it is not the fp32 linear); `--tiers` runs the int8 rows once per instruction tier
(native_build.cpu_tiers: avx2 maddubs, avx512 vpdpbusd, amx tiles for many rows), as `int8@tier`.
`--model bench-1b` takes the shapes of the 1B-shaped model (tools/make_bench_model.py: hidden 2048,
MLP 8192), where every row is whole super-blocks;
`--dtypes` with no value leaves the first table out.

    uv run python tools/bench_linear.py [--rows 1 8 32 512] [--dtypes bfloat16 float32] [--kinds q8_0 ...]
                                        [--activations float32 int8] [--tiers avx2 avx512 amx]
                                        [--model default|bench-1b]
                                        [--repeats 5] [--threads N]
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import torch
import torch.nn.functional as F

from native_build import TIERS, CpuTier
from runtime_runner.kernels.batch_invariant_linear import InvariantLinear
from runtime_runner.kernels.packed_linear import PackedLinear
from runtime_runner.kernels.quantized_linear import QuantizedActivations, QuantizedLinear
from runtime_runner.kernels.quantized_tensor import (
    BLOCKS,
    GGML_TYPE_OF,
    QuantizedTensor,
    QuantKind,
    int8_per_channel_of,
)
from runtime_runner.models.matrix_projection import ConcatProjection
from serve_testing.gguf_quantizer import quantize_rows

HIDDEN = 576
# Each model's layers, (out_features, in_features): the default model's, and the 1B-shaped one's.
MODEL_SHAPES = {
    "default": {
        "qkv": (960, HIDDEN),
        "o": (HIDDEN, HIDDEN),
        "gate_up": (3072, HIDDEN),
        "down": (HIDDEN, 1536),
        "lm_head": (49152, HIDDEN),
    },
    "bench-1b": {
        "qkv": (3072, 2048),
        "o": (2048, 2048),
        "gate_up": (16384, 2048),
        "down": (2048, 8192),
        "lm_head": (49152, 2048),
    },
}
SHAPES = MODEL_SHAPES["default"]
MIN_TIMED_S = 0.02  # calls per timing are repeated until one timing lasts about this long
MIX = "q4_k_m"  # the qkv group of mixed kinds (see the module)
MIX_RUNS: tuple[tuple[QuantKind, int], ...] = (("q5_0", 576 + 192), ("q8_0", 192))  # (kind, rows): q|k, then v
KINDS: tuple[str, ...] = (*GGML_TYPE_OF, "int8", MIX)
_ENTRY = ctypes.CFUNCTYPE(
    None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64
)


def seconds_per_call(call: Callable[[], object], calls: int) -> float:
    """Seconds of one call of `call`, over `calls` calls."""
    started = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - started) / calls


def best_ms(paths: Mapping[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Each path's best milliseconds per call over `repeats` timings, the paths alternating."""
    calls = {}
    for path, call in paths.items():
        call()  # warm: first-touch of the outputs and, for a kernel, its build and scratch
        calls[path] = max(1, math.ceil(MIN_TIMED_S / seconds_per_call(call, 1)))
    best = dict.fromkeys(paths, math.inf)
    for _ in range(repeats):
        for path, call in paths.items():
            best[path] = min(best[path], seconds_per_call(call, calls[path]) * 1e3)
    return best


def bench(
    name: str, dtype: torch.dtype, rows: int, repeats: int, seed: int, shapes: Mapping[str, tuple[int, int]] = SHAPES
) -> str:
    """One Markdown table row: every path at one shape, dtype and row count."""
    out_features, in_features = shapes[name]
    gen = torch.Generator().manual_seed(seed)
    weight = (torch.randn(out_features, in_features, generator=gen) / math.sqrt(in_features)).to(dtype)
    x = torch.randn(rows, in_features, generator=gen).to(dtype)
    invariant, packed = InvariantLinear.of(weight), PackedLinear.of(weight)
    paths: dict[str, Callable[[], torch.Tensor]] = {
        "invariant": lambda: invariant(x),
        "F.linear": lambda: F.linear(x, weight),
    }
    if packed.packed is not None:
        paths["packed"] = lambda: packed(x)
    best = best_ms(paths, repeats)
    diff = float((invariant(x).float() - F.linear(x, weight).float()).abs().max())
    packed_ms = f"{best['packed']:.3f}" if "packed" in best else "n/a"
    packed_ratio = f"{best['packed'] / best['invariant']:.2f}x" if "packed" in best else "n/a"
    return (
        f"| {name} | {out_features}x{in_features} | {rows} | {str(dtype).removeprefix('torch.')} | "
        f"{best['invariant']:.3f} | {best['F.linear']:.3f} | {packed_ms} | "
        f"{best['F.linear'] / best['invariant']:.2f}x | {packed_ratio} | {diff:.2g} |"
    )


def quantized(kind: QuantKind, weight: torch.Tensor) -> QuantizedTensor:
    """`weight` (fp32) quantized as `kind`: by the test fixtures' quantizer (serve_testing.gguf_quantizer:
    gguf-py's own for the 32-value types it quantizes, its packer for the K-quants and IQ4_NL)."""
    if kind == "int8":
        return int8_per_channel_of(weight)
    blocks = quantize_rows(weight.numpy(), GGML_TYPE_OF[kind])
    return QuantizedTensor(kind, torch.from_numpy(blocks), None, (weight.shape[0], weight.shape[1]))


@dataclass(frozen=True)
class Measured:
    """One kind's layer: its call, its matrix de-quantized (the rule's reference), its weight bytes,
    and what a native call's addresses point into (kept alive with it)."""

    call: Callable[[torch.Tensor], torch.Tensor]
    dequantized: torch.Tensor
    weight_bytes: int
    owner: object = None


def _linear(
    kind: QuantKind, weight: torch.Tensor, activations: QuantizedActivations = "float32", tier: CpuTier | None = None
) -> Measured:
    matrix = quantized(kind, weight)
    linear = QuantizedLinear.of(matrix, None, torch.bfloat16, activations, tier)
    weight_bytes = linear.packed.numel() + (0 if linear.scales is None else linear.scales.numel() * 4)
    return Measured(linear, matrix.dequantize(), weight_bytes)


def _mix(weight: torch.Tensor) -> Measured:
    """The qkv group as MIX_RUNS stores it, through the projection stack's native entry."""
    runs = torch.split(weight, [rows for _, rows in MIX_RUNS])
    parts = [_linear(kind, run) for (kind, _), run in zip(MIX_RUNS, runs, strict=True)]
    group = ConcatProjection(tuple(part.call for part in parts))
    native = group.native
    assert native is not None
    entry = _ENTRY(native.entry)

    def call(x: torch.Tensor) -> torch.Tensor:
        out = torch.empty(x.shape[0], native.out_features, dtype=x.dtype)
        entry(native.matrix, x.data_ptr(), x.stride(0), x.shape[0], out.data_ptr(), torch.get_num_threads())
        return out

    dequantized = torch.cat([part.dequantized for part in parts])
    return Measured(call, dequantized, sum(part.weight_bytes for part in parts), owner=group)


def _unfit(kind: str, name: str, in_features: int) -> str | None:
    """Why `kind` has no row at layer `name`, None where it has one."""
    if kind == MIX:
        return None if name == "qkv" else "the qkv group only"
    values = 32 if kind == "int8" else BLOCKS[kind][0]
    return None if in_features % values == 0 else f"rows of {in_features} are not whole {values}-value blocks"


def _variants(
    kinds: Sequence[str], activations: Sequence[QuantizedActivations], tiers: Sequence[CpuTier | None] = (None,)
) -> list[str]:
    """The second table's rows at a shape: each kind once per way of reading x (int8: GGUF kinds
    only, once per tier asked, named `int8@tier`)."""
    return [
        kind if way == "float32" else f"{kind} {way}" + ("" if tier is None else f"@{tier}")
        for kind in kinds
        for way in activations
        for tier in (tiers if way == "int8" else (None,))
        if way == "float32" or kind in GGML_TYPE_OF
    ]


def bench_quantized(
    name: str,
    kinds: Sequence[str],
    rows: int,
    repeats: int,
    seed: int,
    shapes: Mapping[str, tuple[int, int]] = SHAPES,
    activations: Sequence[QuantizedActivations] = ("float32",),
    tiers: Sequence[CpuTier | None] = (None,),
) -> list[str]:
    """Markdown rows, one per kind (and way of reading x): QuantizedLinear against the bf16
    invariant kernel, bf16 rows."""
    out_features, in_features = shapes[name]
    gen = torch.Generator().manual_seed(seed)
    weight = torch.randn(out_features, in_features, generator=gen) / math.sqrt(in_features)
    x = torch.randn(rows, in_features, generator=gen).bfloat16()
    invariant = InvariantLinear.of(weight.bfloat16())
    variants = _variants(kinds, activations, tiers)
    unfit = {variant: _unfit(variant.split()[0], name, in_features) for variant in variants}

    def measure(variant: str) -> Measured:
        kind, *way = variant.split()
        if kind == MIX:
            return _mix(weight)
        reading, _, tier = (way[0] if way else "float32").partition("@")
        return _linear(
            cast(QuantKind, kind), weight, cast(QuantizedActivations, reading), cast(CpuTier, tier) if tier else None
        )

    measured = {variant: measure(variant) for variant in variants if unfit[variant] is None}
    paths: dict[str, Callable[[], object]] = {"invariant": lambda: invariant(x)}
    paths.update({variant: functools.partial(m.call, x) for variant, m in measured.items()})
    best = best_ms(paths, repeats)
    lines = []
    for kind in variants:
        m = measured.get(kind)
        if m is None:
            lines.append(f"| {name} | {out_features}x{in_features} | {rows} | {kind} | n/a: {unfit[kind]} | | | | | |")
            continue
        if " int8" in kind:
            same = "integer rule"  # not the fp32 linear by design, so no dense product to compare against
        else:
            dense = InvariantLinear.of(m.dequantized)(x.float()).bfloat16()
            same = "yes" if torch.equal(m.call(x).view(torch.int16), dense.view(torch.int16)) else "NO"
        rates = (m.weight_bytes / best[kind] / 1e6, invariant.panels.numel() * 2 / best["invariant"] / 1e6)
        rate_cells = " | ".join(f"{rate:.1f}" if rows == 1 else "" for rate in rates)
        lines.append(
            f"| {name} | {out_features}x{in_features} | {rows} | {kind} | {best[kind]:.3f} | "
            f"{best['invariant']:.3f} | {best['invariant'] / best[kind]:.2f}x | {rate_cells} | {same} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8, 32, 512], help="M, rows per call")
    parser.add_argument(
        "--dtypes", nargs="*", default=["bfloat16", "float32"], choices=["bfloat16", "float32", "float16"]
    )
    parser.add_argument("--layers", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--model", choices=list(MODEL_SHAPES), default="default", help="whose layer shapes")
    parser.add_argument(
        "--activations",
        nargs="+",
        default=["float32"],
        choices=["float32", "int8"],
        help="ways the GGUF kinds read x in the second table (default float32)",
    )
    parser.add_argument(
        "--kinds",
        nargs="*",
        default=list(KINDS),
        choices=KINDS,
        help="quantized kinds of the second table (none: no second table)",
    )
    parser.add_argument(
        "--tiers",
        nargs="+",
        default=None,
        choices=list(TIERS),
        help="instruction tiers the int8 rows run on, a row each (default: this CPU's highest)",
    )
    parser.add_argument("--repeats", type=int, default=5, help="alternating timings per path; the best is reported")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    shapes = MODEL_SHAPES[args.model]
    print(
        f"linear layers of the {args.model} model on a CPU, {torch.get_num_threads()} threads, best of "
        f"{args.repeats}; ms per call, speed-up = their time / invariant's time\n"
    )
    if args.dtypes:
        print(
            "| layer | N x K | M | dtype | invariant ms | F.linear ms | packed ms | vs F.linear | vs packed "
            "| max abs diff |"
        )
        print("|---|---|---|---|---|---|---|---|---|---|")
    with torch.inference_mode():
        for dtype in (getattr(torch, d) for d in args.dtypes):
            for rows in args.rows:
                for name in args.layers:
                    print(bench(name, dtype, rows, args.repeats, args.seed, shapes), flush=True)
    if not args.kinds:
        return
    print(
        "\nweights kept quantized, bf16 activations: QuantizedLinear against the bf16 invariant kernel; "
        "speed-up = invariant's time / quantized time; GB/s = weight bytes read per second (M = 1)\n"
    )
    print(
        "| layer | N x K | M | kind | quantized ms | invariant bf16 ms | speed-up | quantized GB/s | invariant GB/s "
        "| bits = fp32 invariant of de-quantized |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    with torch.inference_mode():
        for rows in args.rows:
            for name in args.layers:
                lines = bench_quantized(
                    name, args.kinds, rows, args.repeats, args.seed, shapes, args.activations, args.tiers or (None,)
                )
                print("\n".join(lines), flush=True)


if __name__ == "__main__":
    main()
