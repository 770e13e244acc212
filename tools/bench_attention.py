"""Decode attention of torch_native at serving shapes, beside the previous implementation.

The shape of a batch-32 decode step of the default model (SmolLM2-135M: 9 query heads, 3 KV heads,
head_dim 64, bf16): 32 requests whose lengths are drawn from 100-420 (fixed seed), their pages
handed out by a fresh PageAllocator the way the scheduler does (each prompt a contiguous run, the
decoded tokens' pages interleaved between requests). Every layer has its own pool, as in the
runner, so no layer finds the previous layer's keys in cache.

Three implementations run alternately in one process, each best-of `--repeats`:
  baseline       the decode path of torch_native before this change, copied below verbatim
                 (slot-by-slot gather padded to the longest request, fp32 softmax)
  baseline+kept  the same math gathering into buffers kept across calls: isolates how much of
                 the baseline's time is page faults on its freshly allocated gather buffers
  torch_native   the backend as it is now (plan() once per step, attend() per layer)

Figures: microseconds per attend() call (one layer), plan() per step, and the ratios.

--whole-step instead times whole decode steps of the default model through the runner (32 prompts of
100-400 random tokens, prefilled, then decoding), one runner per implementation: the baseline
(torch_native with its decode-only forwards sent through the copied baseline path) and torch_native.

    uv run python tools/bench_attention.py [--page-sizes 1 16] [--threads N] [--repeats 5] [--whole-step]
"""

from __future__ import annotations

import argparse
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from attn_backends import AttentionMetadataView, TorchNativeBackend
from config_bags import Bags, DeviceBag, MemoryBag, ModelBag, ScheduleBag, publish, unpublish

from runtime_runner.attention_seam import AttentionMetadata
from runtime_runner.default_model import ensure_default_model
from runtime_runner.runner import ModelRunner
from runtime_runner.standalone import StandaloneDriver
from runtime_scheduler.page_allocator import PageAllocator

HEADS, KV_HEADS, HEAD_DIM = 9, 3, 64


# --- baseline: torch_native's decode path before this change (commit e73d130), verbatim ---------

@dataclass(frozen=True)
class BaselineDecodeGroup:
    """The one-token requests of a forward, attended together (baseline)."""

    token_rows: torch.Tensor | None
    kv_slots: torch.Tensor  # [decodes * max_seq_len]: pool slot of each key position (0 past the end)
    hidden: torch.Tensor  # [decodes, 1, 1, max_seq_len]: the keys past each request's length


def baseline_decode_group(metadata: AttentionMetadata, requests: torch.Tensor | None, rows: torch.Tensor | None, max_seq: int) -> BaselineDecodeGroup:
    """Key slots and length mask of the one-token requests (`requests`; None: all of them)."""
    page_size = metadata.page_size
    page_table = metadata.page_table if requests is None else metadata.page_table.index_select(0, requests)
    seq_lens = metadata.seq_lens if requests is None else metadata.seq_lens.index_select(0, requests)
    key_pos = torch.arange(max_seq, device=page_table.device)
    page_index = (key_pos // page_size).clamp(max=page_table.shape[1] - 1).expand(page_table.shape[0], max_seq)
    slots = page_table.gather(1, page_index) * page_size + key_pos % page_size
    key_valid = key_pos[None, :] < seq_lens[:, None]
    slots = torch.where(key_valid, slots, 0)
    return BaselineDecodeGroup(rows, slots.reshape(-1), ~key_valid[:, None, None, :])


def baseline_decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, group: BaselineDecodeGroup, scale: float) -> torch.Tensor:
    """One query per request: q [requests, heads, d] against each request's gathered keys (baseline)."""
    requests, heads, head_dim = q.shape
    kv_heads = k_cache.shape[0]
    k = k_cache.index_select(1, group.kv_slots).view(kv_heads, requests, -1, head_dim)
    v = v_cache.index_select(1, group.kv_slots).view(kv_heads, requests, -1, head_dim)
    grouped = (q * scale).view(requests, kv_heads, heads // kv_heads, head_dim).transpose(0, 1)
    scores = torch.matmul(grouped, k.transpose(-1, -2)).masked_fill_(group.hidden.transpose(0, 1), float("-inf"))
    weights = scores.softmax(-1, dtype=torch.promote_types(scores.dtype, torch.float32)).to(v.dtype)
    return torch.matmul(weights, v).transpose(0, 1).reshape(requests, heads, head_dim)

# --- end of baseline --------------------------------------------------------------------------


class KeptBuffers:
    """Gather buffers kept across calls, for the baseline+kept variant."""

    def __init__(self) -> None:
        self.k: torch.Tensor | None = None
        self.v: torch.Tensor | None = None

    def attend(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, group: BaselineDecodeGroup, scale: float) -> torch.Tensor:
        """The baseline's math, its two gathers written into the kept buffers."""
        requests, heads, head_dim = q.shape
        kv_heads = k_cache.shape[0]
        shape = (kv_heads, group.kv_slots.shape[0], head_dim)
        if self.k is None or self.k.shape != shape:
            self.k, self.v = k_cache.new_empty(shape), k_cache.new_empty(shape)
        assert self.v is not None
        k = torch.index_select(k_cache, 1, group.kv_slots, out=self.k).view(kv_heads, requests, -1, head_dim)
        v = torch.index_select(v_cache, 1, group.kv_slots, out=self.v).view(kv_heads, requests, -1, head_dim)
        grouped = (q * scale).view(requests, kv_heads, heads // kv_heads, head_dim).transpose(0, 1)
        scores = torch.matmul(grouped, k.transpose(-1, -2)).masked_fill_(group.hidden.transpose(0, 1), float("-inf"))
        weights = scores.softmax(-1, dtype=torch.promote_types(scores.dtype, torch.float32)).to(v.dtype)
        return torch.matmul(weights, v).transpose(0, 1).reshape(requests, heads, head_dim)


class BaselineBackend(TorchNativeBackend):
    """torch_native for forwards with prefills; decode-only forwards through the baseline decode path."""

    def __init__(self) -> None:
        super().__init__()
        self._baseline: BaselineDecodeGroup | None = None

    def plan(self, metadata: AttentionMetadataView) -> None:
        """Plan as torch_native; a decode-only forward also gets the baseline's group."""
        super().plan(metadata)
        decode_only = metadata.max_extend_len == 1
        self._baseline = baseline_decode_group(metadata, None, None, metadata.max_seq_len) if decode_only else None  # type: ignore[arg-type]

    def attend(self, q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, *, scale: float) -> torch.Tensor:
        """The baseline's decode attention for decode-only forwards, torch_native's otherwise."""
        if self._baseline is not None:
            return baseline_decode_attention(q, k_cache, v_cache, self._baseline, scale)
        return super().attend(q, k_cache, v_cache, scale=scale)


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
    """Measure the three implementations alternately at one page size and print the figures."""
    work = workload(args.requests, page_size, args.layers, args.seed, torch.bfloat16)
    meta, layers, scale = work.metadata, range(args.layers), 1 / math.sqrt(HEAD_DIM)
    max_seq = int(meta.seq_lens.max())
    backend, kept = TorchNativeBackend(), KeptBuffers()

    def baseline_step() -> None:
        group = baseline_decode_group(meta, None, None, max_seq)
        for i in layers:
            baseline_decode_attention(work.queries[i], *work.pools[i], group, scale)

    def kept_step() -> None:
        group = baseline_decode_group(meta, None, None, max_seq)
        for i in layers:
            kept.attend(work.queries[i], *work.pools[i], group, scale)

    def new_step() -> None:
        backend.plan(meta)
        for i in layers:
            backend.attend(work.queries[i], *work.pools[i], scale=scale)

    backend.plan(meta)
    group = baseline_decode_group(meta, None, None, max_seq)
    diff = max(float((backend.attend(work.queries[i], *work.pools[i], scale=scale).float()
                      - baseline_decode_attention(work.queries[i], *work.pools[i], group, scale).float()).abs().max()) for i in layers)
    steps = {"baseline": baseline_step, "baseline+kept": kept_step, "torch_native": new_step}
    best = dict.fromkeys(steps, math.inf)
    for _ in range(args.repeats):
        for name, step in steps.items():
            step()  # warm: first-touch of this implementation's buffers is not what a serving step pays
            best[name] = min(best[name], best_us(step, args.steps) / args.layers)
    plan_old = min(best_us(lambda: baseline_decode_group(meta, None, None, max_seq), 20) for _ in range(args.repeats))
    plan_new = min(best_us(lambda: backend.plan(meta), 20) for _ in range(args.repeats))
    lengths = meta.seq_lens.tolist()
    print(f"page_size {page_size}: {args.requests} requests, {sum(lengths)} keys (longest {max_seq}), "
          f"max |new - baseline| {diff:.4f} (bf16)")
    for name, us in best.items():
        print(f"  {name:14s} {us:8.1f} us per layer call   baseline / this = {best['baseline'] / us:5.2f}x"
              f"   baseline+kept / this = {best['baseline+kept'] / us:5.2f}x")
    print(f"  plan() per step: baseline {plan_old:.1f} us, torch_native {plan_new:.1f} us")


def whole_step(page_size: int, args: argparse.Namespace) -> None:
    """Milliseconds per decode step of the default model at serving shapes, baseline against torch_native."""
    model_dir = ensure_default_model()
    unpublish()
    publish(Bags(model=ModelBag(model_path=str(model_dir), dtype="bfloat16"), schedule=ScheduleBag(page_size=page_size),
                 memory=MemoryBag(max_total_tokens=args.requests * 512), device=DeviceBag(device="cpu", cpu_threads=args.threads)),
            role="standalone")
    rng = random.Random(args.seed)
    prompts = [[rng.randrange(100, 40000) for _ in range(rng.randint(100, 400))] for _ in range(args.requests)]
    drivers = {}
    for name, backend_class in (("baseline", BaselineBackend), ("torch_native", TorchNativeBackend)):
        driver = StandaloneDriver(ModelRunner(lambda wanted, made=backend_class: (wanted, made())))
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
        print(f"  {name:14s} {ms:8.1f} ms per step = {args.requests / ms * 1000:6.1f} tok/s   baseline / this = {best['baseline'] / ms:5.2f}x")


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
