"""Attention per half at serving shapes: every attention kernel that can run on this host, side by side.

Shapes of the default model (SmolLM2-135M: 9 query heads, 3 KV heads, head_dim 64, bf16), pages
handed out by a fresh PageAllocator the way the scheduler does (each prompt a contiguous run, the
decoded tokens' pages interleaved between requests). Every layer has its own pool, as in the
runner, so no layer finds the previous layer's keys in cache.

  decode  a batch-32 decode step: 32 requests of 100-420 keys (fixed seed), one new token each
  extend  a prefill step under the CPU prefill budget (512 tokens): two fresh prompts of 128
          tokens and a 256-token chunk continuing a prompt with 256 cached

The kernels, in one process, alternating, best of `--repeats`: those `refusal_on` lets run here
(on a CPU torch_native and cpu_paged; on CUDA torch_native, triton, and flashinfer when installed).
Figures: microseconds per attend() call (one layer), plan() per step, and each kernel's speed
against torch_native.

--whole-step instead times whole decode steps of the default model through the runner (32 prompts
of 100-400 random tokens, prefilled, then decoding) under three settings: the default (auto,
deterministic: cpu_paged both halves and the invariant projections), auto with deterministic
inference off (the decode half is cpu_paged either way; oneDNN/aten projections), and torch_native
for both halves (deterministic inference then resolves off).

    uv run python tools/bench_attention.py [--page-sizes 1 16] [--threads N] [--repeats 5] [--whole-step]
"""

from __future__ import annotations

import argparse
import functools
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from attn_backends import (
    KERNEL_NAMES,
    AttentionBackend,
    ForwardMode,
    build_attention_backend,
    build_attention_pair,
    refusal_on,
)
from config_bags import publish, unpublish
from config_bags.server import Bags, DeviceBag, ExecBag, KernelBag, MemoryBag, ModelBag, ScheduleBag
from runtime_runner.attention_seam import AttentionMetadata
from runtime_runner.loading.default_model import ensure_default_model
from runtime_runner.runner import ModelRunner
from runtime_runner.standalone import StandaloneDriver
from runtime_scheduler.page_allocator import PageAllocator

HEADS, KV_HEADS, HEAD_DIM = 9, 3, 64
WHOLE_STEP_PAIRS = {
    "auto (default)": KernelBag(),
    "auto, not deterministic": KernelBag(enable_deterministic_inference=False),
    "torch_native both": KernelBag(attention_backend="torch_native"),
}


@dataclass(frozen=True)
class Workload:
    """One step's metadata and, per layer, a pool and the layer's queries."""

    metadata: AttentionMetadata
    pools: list[tuple[torch.Tensor, torch.Tensor]]
    queries: list[torch.Tensor]


def _paged(
    prefix: list[int],
    extend: list[int],
    decoded: list[int],
    page_size: int,
    layers: int,
    seed: int,
    mode: ForwardMode,
    dtype: torch.dtype,
) -> Workload:
    """Prompts allocated first, then the tokens decoded since page by page, interleaved between requests."""
    lengths = [p + e for p, e in zip(prefix, extend, strict=True)]
    pages_needed = sum(-(-n // page_size) for n in lengths)
    allocator = PageAllocator(pages_needed + 64)
    held = [n - d for n, d in zip(lengths, decoded, strict=True)]
    tables = [allocator.alloc(-(-h // page_size)) for h in held]
    for _ in range(max(decoded)):
        for r, n in enumerate(lengths):
            if held[r] < n:
                if held[r] % page_size == 0:
                    tables[r] += allocator.alloc(1)
                held[r] += 1
    width = max(map(len, tables))
    table = torch.tensor([t + [0] * (width - len(t)) for t in tables])
    metadata = AttentionMetadata(
        mode,
        page_size,
        table,
        torch.tensor(prefix),
        torch.tensor(extend),
        torch.tensor(lengths),
        sum(extend),
        max(extend),
        max(lengths),
    )
    gen = torch.Generator().manual_seed(seed)
    slots = allocator.num_pages * page_size
    pools = [
        (
            torch.randn(KV_HEADS, slots, HEAD_DIM, generator=gen).to(dtype),
            torch.randn(KV_HEADS, slots, HEAD_DIM, generator=gen).to(dtype),
        )
        for _ in range(layers)
    ]
    # The runner's q is a view into the fused qkv projection: heads of a wider row, not contiguous.
    queries = [
        torch.randn(sum(extend), HEADS + 2 * KV_HEADS, HEAD_DIM, generator=gen).to(dtype)[:, :HEADS]
        for _ in range(layers)
    ]
    return Workload(metadata, pools, queries)


def decode_workload(requests: int, page_size: int, layers: int, seed: int, dtype: torch.dtype) -> Workload:
    """`requests` decodes of 100-420 keys, up to 128 of them decoded since the prompt."""
    rng = random.Random(seed)
    lengths = [rng.randint(100, 420) for _ in range(requests)]
    decoded = [rng.randint(0, min(128, n - 1)) for n in lengths]
    return _paged([n - 1 for n in lengths], [1] * requests, decoded, page_size, layers, seed, "decode", dtype)


def extend_workload(page_size: int, layers: int, seed: int, dtype: torch.dtype) -> Workload:
    """Two fresh 128-token prompts and a 256-token chunk over 256 cached: 512 new tokens."""
    return _paged([0, 0, 256], [128, 128, 256], [0, 0, 0], page_size, layers, seed, "extend", dtype)


def best_us(step: Callable[[], object], steps: int) -> float:
    """Microseconds of one call of `step`, over `steps` calls."""
    started = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - started) / steps * 1e6


def kernels_here(device_type: str) -> list[str]:
    """The kernels that can run on this host, torch_native first."""
    return [k for k in KERNEL_NAMES if refusal_on(k, device_type) is None]


def run(half: str, page_size: int, args: argparse.Namespace) -> None:
    """Measure every kernel that runs here alternately, for one half at one page size, and print the figures."""
    device = torch.device(args.device)
    work = (
        decode_workload(args.requests, page_size, args.layers, args.seed, torch.bfloat16)
        if half == "decode"
        else extend_workload(page_size, args.layers, args.seed, torch.bfloat16)
    )
    work = Workload(
        _on(work.metadata, device),
        [(k.to(device), v.to(device)) for k, v in work.pools],
        [q.to(device) for q in work.queries],
    )
    meta, layers, scale = work.metadata, range(args.layers), 1 / math.sqrt(HEAD_DIM)
    backends: dict[str, AttentionBackend] = {}
    for kernel in kernels_here(device.type):
        backends[kernel] = build_attention_backend(
            kernel, half="decode" if half == "decode" else "prefill", device_type=device.type, batch_invariant=False
        )[1]

    def step_of(backend: AttentionBackend) -> Callable[[], None]:
        def step() -> None:
            backend.plan(meta)
            for i in layers:
                backend.attend(work.queries[i], *work.pools[i], scale=scale)
            if device.type == "cuda":
                torch.cuda.synchronize()

        return step

    outputs = {}
    for name, backend in backends.items():
        backend.plan(meta)
        outputs[name] = [backend.attend(work.queries[i], *work.pools[i], scale=scale).float() for i in layers]
    best = dict.fromkeys(backends, math.inf)
    plan_us = dict.fromkeys(backends, math.inf)
    for _ in range(args.repeats):
        for name, backend in backends.items():
            step = step_of(backend)
            step()  # warm: first-touch of this kernel's buffers is not what a serving step pays
            best[name] = min(best[name], best_us(step, args.steps) / args.layers)
            plan_us[name] = min(plan_us[name], best_us(functools.partial(backend.plan, meta), 20))
    lengths = meta.seq_lens.tolist()
    print(
        f"{half} page_size {page_size}: {len(lengths)} requests, {meta.num_tokens} new tokens, {sum(lengths)} keys "
        f"(longest {max(lengths)})"
    )
    for name, us in best.items():
        diff = max(float((a - b).abs().max()) for a, b in zip(outputs[name], outputs["torch_native"], strict=True))
        print(
            f"  {name:12s} {us:9.1f} us per layer call   torch_native / this = {best['torch_native'] / us:5.2f}x   "
            f"plan() {plan_us[name]:7.1f} us   max |this - torch_native| {diff:.4f}"
        )


def _on(meta: AttentionMetadata, device: torch.device) -> AttentionMetadata:
    return AttentionMetadata(
        meta.forward_mode,
        meta.page_size,
        meta.page_table.to(device),
        meta.prefix_lens.to(device),
        meta.extend_lens.to(device),
        meta.seq_lens.to(device),
        meta.num_tokens,
        meta.max_extend_len,
    )


def whole_step(page_size: int, args: argparse.Namespace) -> None:
    """Milliseconds per decode step of the default model at serving shapes, under each pair of WHOLE_STEP_PAIRS."""
    model_dir = ensure_default_model()
    pool = args.requests * 512
    rng = random.Random(args.seed)
    prompts = [[rng.randrange(100, 40000) for _ in range(rng.randint(100, 400))] for _ in range(args.requests)]
    drivers = {}
    for name, kernel in WHOLE_STEP_PAIRS.items():
        unpublish()
        # The driver runs whole batches itself; the scheduler's budgets only have to fit the pool.
        publish(
            Bags(
                model=ModelBag(model_path=str(model_dir), dtype="bfloat16"),
                schedule=ScheduleBag(page_size=page_size, chunked_prefill_size=-1, max_prefill_tokens=pool),
                memory=MemoryBag(max_total_tokens=pool),
                device=DeviceBag(device=args.device, cpu_threads=args.threads),
                exec=ExecBag(kernel=kernel),
            ),
            role="standalone",
        )
        driver = StandaloneDriver(ModelRunner(build_attention_pair))
        for prompt in prompts:
            driver.add(prompt)
        while any(seq.prefilling for seq in driver.active):
            driver.step(512)
        driver.step()
        drivers[name] = driver
    best = dict.fromkeys(drivers, math.inf)
    for _ in range(args.repeats):
        for name, driver in drivers.items():
            best[name] = min(best[name], best_us(driver.step, args.steps) / 1000)
    unpublish()
    first = next(iter(best))
    print(
        f"page_size {page_size}: whole decode step, {args.requests} requests of 100-400 prompt tokens, default model, "
        "bf16"
    )
    for name, ms in best.items():
        print(
            f"  {name:24s} {ms:8.1f} ms per step = {args.requests / ms * 1000:6.1f} tok/s   this / {first} = "
            f"{ms / best[first]:5.2f}x time"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--page-sizes", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--halves", nargs="+", default=["extend", "decode"], choices=["extend", "decode"])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=["cpu", "cuda"])
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--layers", type=int, default=30, help="layers per step, each with its own pool")
    parser.add_argument("--steps", type=int, default=5, help="steps per timed run")
    parser.add_argument("--repeats", type=int, default=5, help="alternating runs per kernel; the best is reported")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--whole-step", action="store_true", help="time whole decode steps of the default model instead"
    )
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(
        f"attention, {HEADS} heads / {KV_HEADS} KV heads / head_dim {HEAD_DIM}, bf16, on {args.device}, "
        f"{torch.get_num_threads()} threads; kernels here: {', '.join(kernels_here(args.device))}"
    )
    with torch.inference_mode():
        for page_size in args.page_sizes:
            if args.whole_step:
                whole_step(page_size, args)
                continue
            for half in args.halves:
                run(half, page_size, args)


if __name__ == "__main__":
    main()
