"""The decoder's linear layers on a CPU: the batch-invariant kernel against torch's matmuls.

Shapes of the default model (SmolLM2-135M, hidden 576): qkv 960x576, o 576x576, gate_up 3072x576,
down 576x1536, lm_head 49152x576, at M rows per call (1: a one-request decode step; 32: a batch-32
decode step; 512: a prefill step under the CPU prefill budget). Three paths, alternating within
each repeat, best of `--repeats`:

  invariant  runtime_runner.batch_invariant_linear.InvariantLinear (row i depends on x[i] alone)
  F.linear   torch.nn.functional.linear on the plain weight (oneDNN / aten, blocking chosen by M)
  packed     PackedLinear's oneDNN-prepacked weight, where this torch build can pack the dtype

Figures: milliseconds per call, the speed-up of the invariant kernel over each (their time / its
time), and the largest |invariant - F.linear| (the two round differently, so not 0). The weights
stay hot in cache between calls, so one-row figures are a best case: a decode step reads ~30
layers' weights, far more than L3 holds.

    uv run python tools/bench_linear.py [--rows 1 32 512] [--dtypes bfloat16 float32] [--repeats 5] [--threads N]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from runtime_runner.batch_invariant_linear import InvariantLinear
from runtime_runner.packed_linear import PackedLinear

HIDDEN = 576
SHAPES = {"qkv": (960, HIDDEN), "o": (HIDDEN, HIDDEN), "gate_up": (3072, HIDDEN), "down": (HIDDEN, 1536),
          "lm_head": (49152, HIDDEN)}
MIN_TIMED_S = 0.02  # calls per timing are repeated until one timing lasts about this long


def seconds_per_call(call: Callable[[], object], calls: int) -> float:
    """Seconds of one call of `call`, over `calls` calls."""
    started = time.perf_counter()
    for _ in range(calls):
        call()
    return (time.perf_counter() - started) / calls


def bench(name: str, dtype: torch.dtype, rows: int, repeats: int, seed: int) -> str:
    """One Markdown table row: every path at one shape, dtype and row count."""
    out_features, in_features = SHAPES[name]
    gen = torch.Generator().manual_seed(seed)
    weight = (torch.randn(out_features, in_features, generator=gen) / math.sqrt(in_features)).to(dtype)
    x = torch.randn(rows, in_features, generator=gen).to(dtype)
    invariant, packed = InvariantLinear.of(weight), PackedLinear.of(weight)
    paths: dict[str, Callable[[], torch.Tensor]] = {"invariant": lambda: invariant(x), "F.linear": lambda: F.linear(x, weight)}
    if packed.packed is not None:
        paths["packed"] = lambda: packed(x)
    calls = {}
    for path, call in paths.items():
        call()  # warm: first-touch of the outputs and, for the kernel, its build and scratch
        calls[path] = max(1, math.ceil(MIN_TIMED_S / seconds_per_call(call, 1)))
    best = dict.fromkeys(paths, math.inf)
    for _ in range(repeats):
        for path, call in paths.items():
            best[path] = min(best[path], seconds_per_call(call, calls[path]) * 1e3)
    diff = float((invariant(x).float() - F.linear(x, weight).float()).abs().max())
    packed_ms = f"{best['packed']:.3f}" if "packed" in best else "n/a"
    packed_ratio = f"{best['packed'] / best['invariant']:.2f}x" if "packed" in best else "n/a"
    return (f"| {name} | {out_features}x{in_features} | {rows} | {str(dtype).removeprefix('torch.')} | "
            f"{best['invariant']:.3f} | {best['F.linear']:.3f} | {packed_ms} | "
            f"{best['F.linear'] / best['invariant']:.2f}x | {packed_ratio} | {diff:.2g} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 32, 512], help="M, rows per call")
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"], choices=["bfloat16", "float32", "float16"])
    parser.add_argument("--layers", nargs="+", default=list(SHAPES), choices=list(SHAPES))
    parser.add_argument("--repeats", type=int, default=5, help="alternating timings per path; the best is reported")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(f"linear layers of the default model on a CPU, {torch.get_num_threads()} threads, best of {args.repeats}; "
          "ms per call, speed-up = their time / invariant's time\n")
    print("| layer | N x K | M | dtype | invariant ms | F.linear ms | packed ms | vs F.linear | vs packed | max abs diff |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    with torch.inference_mode():
        for dtype in (getattr(torch, d) for d in args.dtypes):
            for rows in args.rows:
                for name in args.layers:
                    print(bench(name, dtype, rows, args.repeats, args.seed), flush=True)


if __name__ == "__main__":
    main()
