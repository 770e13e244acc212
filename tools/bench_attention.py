"""Decode attention of torch_native at serving shapes: the CPU kernel against the gathered torch path.

The shape of a batch-32 decode step of the default model (SmolLM2-135M: 9 query heads, 3 KV heads,
head_dim 64, bf16): 32 requests whose lengths are drawn from 100-420 (fixed seed), their pages
handed out by a fresh PageAllocator the way the scheduler does (each prompt a contiguous run, the
decoded tokens' pages interleaved between requests). Every layer has its own pool, as in the
runner, so no layer finds the previous layer's keys in cache.

Two implementations run alternately in one process, each best-of `--repeats`:
  gathered  torch_native's torch path (cpu_kernel=False): keys gathered a page at a time
            into chunks, two batched matmuls; what torch_native ran on a CPU before the kernel,
            and what it runs on other devices
  kernel    torch_native as it runs on a CPU: paged_attention_kernel reads keys and values in place

Figures: microseconds per attend() call (one layer), plan() per step, and the ratio.

--whole-step instead times whole decode steps of the default model through the runner (32 prompts of
100-400 random tokens, prefilled, then decoding), one runner per implementation.

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
from attn_backends import TorchNativeBackend
from config_bags import Bags, DeviceBag, MemoryBag, ModelBag, ScheduleBag, publish, unpublish

from runtime_runner.attention_seam import AttentionMetadata
from runtime_runner.default_model import ensure_default_model
from runtime_runner.runner import ModelRunner
from runtime_runner.standalone import StandaloneDriver
from runtime_scheduler.page_allocator import PageAllocator

HEADS, KV_HEADS, HEAD_DIM = 9, 3, 64
IMPLEMENTATIONS = {"gathered": False, "kernel": True}  # name -> TorchNativeBackend(cpu_kernel=...)


@dataclass(frozen=True)
class Workload:
    """One decode step's metadata and, per layer, a pool and the layer's queries."""

    metadata: AttentionMetadata
    pools: list[tuple[torch.Tensor, torch.Tensor]]
    queries: list[torch.Tensor]


def workload(requests: int, page_size: int, layers: int, seed: int, dtype: torch.dtype) -> Workload:
    """Lengths drawn from 100-420; prompts allocated first, then the decoded tokens' pages step by step."""
    rng = random.Random(seed)
    lengths = [rng.randint(100, 420) for _ in range(requests)]
    decoded = [rng.randint(0, min(128, n - 1)) for n in lengths]
    pages_needed = sum(-(-n // page_size) for n in lengths)
    allocator = PageAllocator(pages_needed + 64)
    tables = [allocator.alloc(-(-(n - d) // page_size)) for n, d in zip(lengths, decoded, strict=True)]
    held = [n - d for n, d in zip(lengths, decoded, strict=True)]
    for _ in range(max(decoded)):  # one decode step: every unfinished request takes one more slot
        for r, n in enumerate(lengths):
            if held[r] < n:
                if held[r] % page_size == 0:
                    tables[r] += allocator.alloc(1)
                held[r] += 1
    width = max(map(len, tables))
    table = torch.tensor([t + [0] * (width - len(t)) for t in tables])
    seq = torch.tensor(lengths)
    metadata = AttentionMetadata(page_size, table, seq - 1, torch.ones(requests, dtype=torch.long), seq, requests, 1, max(lengths))
    gen = torch.Generator().manual_seed(seed)
    slots = allocator.num_pages * page_size
    pools = [(torch.randn(KV_HEADS, slots, HEAD_DIM, generator=gen).to(dtype), torch.randn(KV_HEADS, slots, HEAD_DIM, generator=gen).to(dtype))
             for _ in range(layers)]
    # The runner's q is a view into the fused qkv projection: heads of a wider row, not contiguous.
    queries = [torch.randn(requests, HEADS + 2 * KV_HEADS, HEAD_DIM, generator=gen).to(dtype)[:, :HEADS] for _ in range(layers)]
    return Workload(metadata, pools, queries)


def best_us(step: Callable[[], object], steps: int) -> float:
    """Microseconds of one call of `step`, over `steps` calls."""
    started = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - started) / steps * 1e6


def run(page_size: int, args: argparse.Namespace) -> None:
    """Measure the two implementations alternately at one page size and print the figures."""
    work = workload(args.requests, page_size, args.layers, args.seed, torch.bfloat16)
    meta, layers, scale = work.metadata, range(args.layers), 1 / math.sqrt(HEAD_DIM)
    backends = {name: TorchNativeBackend(cpu_kernel=kernel) for name, kernel in IMPLEMENTATIONS.items()}

    def step_of(backend: TorchNativeBackend) -> Callable[[], None]:
        def step() -> None:
            backend.plan(meta)
            for i in layers:
                backend.attend(work.queries[i], *work.pools[i], scale=scale)
        return step

    outputs = []
    for backend in backends.values():
        backend.plan(meta)
        outputs.append([backend.attend(work.queries[i], *work.pools[i], scale=scale).float() for i in layers])
    diff = max(float((a - b).abs().max()) for a, b in zip(*outputs, strict=True))
    best = dict.fromkeys(backends, math.inf)
    plan_us = dict.fromkeys(backends, math.inf)
    for _ in range(args.repeats):
        for name, backend in backends.items():
            step = step_of(backend)
            step()  # warm: first-touch of this implementation's buffers is not what a serving step pays
            best[name] = min(best[name], best_us(step, args.steps) / args.layers)
            plan_us[name] = min(plan_us[name], best_us(functools.partial(backend.plan, meta), 20))
    lengths = meta.seq_lens.tolist()
    print(f"page_size {page_size}: {args.requests} requests, {sum(lengths)} keys (longest {max(lengths)}), "
          f"max |kernel - gathered| {diff:.4f} (bf16)")
    for name, us in best.items():
        print(f"  {name:9s} {us:8.1f} us per layer call   gathered / this = {best['gathered'] / us:5.2f}x   plan() {plan_us[name]:6.1f} us")


def whole_step(page_size: int, args: argparse.Namespace) -> None:
    """Milliseconds per decode step of the default model at serving shapes, gathered against kernel."""
    model_dir = ensure_default_model()
    unpublish()
    pool = args.requests * 512
    # The driver runs whole batches itself; the scheduler's budgets only have to fit the pool.
    publish(Bags(model=ModelBag(model_path=str(model_dir), dtype="bfloat16"),
                 schedule=ScheduleBag(page_size=page_size, chunked_prefill_size=-1, max_prefill_tokens=pool),
                 memory=MemoryBag(max_total_tokens=pool), device=DeviceBag(device="cpu", cpu_threads=args.threads)),
            role="standalone")
    rng = random.Random(args.seed)
    prompts = [[rng.randrange(100, 40000) for _ in range(rng.randint(100, 400))] for _ in range(args.requests)]
    drivers = {}
    for name, kernel in IMPLEMENTATIONS.items():
        driver = StandaloneDriver(ModelRunner(lambda wanted, k=kernel: (wanted, TorchNativeBackend(cpu_kernel=k))))
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
    print(f"page_size {page_size}: whole decode step, {args.requests} requests of 100-400 prompt tokens, default model, bf16")
    for name, ms in best.items():
        print(f"  {name:9s} {ms:8.1f} ms per step = {args.requests / ms * 1000:6.1f} tok/s   gathered / this = {best['gathered'] / ms:5.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--page-sizes", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--layers", type=int, default=30, help="layers per step, each with its own pool")
    parser.add_argument("--steps", type=int, default=5, help="steps per timed run")
    parser.add_argument("--repeats", type=int, default=5, help="alternating runs per implementation; the best is reported")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--whole-step", action="store_true", help="time whole decode steps of the default model instead")
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    print(f"decode attention, {HEADS} heads / {KV_HEADS} KV heads / head_dim {HEAD_DIM}, bf16, {torch.get_num_threads()} threads")
    with torch.inference_mode():
        for page_size in args.page_sizes:
            (whole_step if args.whole_step else run)(page_size, args)


if __name__ == "__main__":
    main()
