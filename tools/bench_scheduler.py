"""Scheduler overhead per step, in microseconds, at 256 running requests.

The executor is a trivial stand-in (next token from the last input token) whose own time is
measured and subtracted, so the figure is the scheduler's: planning, page bookkeeping, building
the batch, absorbing the results, and the prefix cache. Two baselines run in the same process:
the fake executor's own time per step, and the bare cost of building a list of 256 plain tuples
(what any batch of 256 requests costs to describe in Python).

Workloads:
  decode      256 requests with distinct 128-token prompts, all decoding (steady state).
  shared      a shared 512-token system prompt plus a distinct 32-token question per request,
              256 running, requests finishing and new ones arriving (prefix hits, mixed batches).

    uv run python tools/bench_scheduler.py [--steps 300] [--page-size 1 16]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from config_bags import publish, unpublish
from config_bags.server import Bags, ScheduleBag
from runtime_scheduler import ForwardBatch, Request, Scheduler, StopConditions

RUNNING = 256
VOCAB = 32000


@dataclass(frozen=True)
class Output:
    """A forward's results, shaped like the runner's ForwardOutput."""

    next_token_ids: tuple[int, ...]
    next_token_logprobs: tuple[float | None, ...]
    top_logprobs: tuple[tuple[tuple[int, float], ...] | None, ...]
    errors: tuple[str | None, ...]


class TimedFakeExecutor:
    """Next token = a function of the request's last input token; records its own time."""

    def __init__(self) -> None:
        self.ns = 0

    def forward(self, batch: ForwardBatch) -> Output:
        t0 = time.perf_counter_ns()
        ids = batch.input_ids
        tokens: list[int] = []
        end = 0
        for r in batch.requests:
            end += r.extend_len
            tokens.append((ids[end - 1] * 31 + 7) % VOCAB if r.sample else -1)
        nones = (None,) * len(tokens)
        out = Output(tuple(tokens), nones, nones, nones)
        self.ns += time.perf_counter_ns() - t0
        return out


@dataclass(frozen=True)
class Figures:
    """Per-step times in microseconds."""

    overhead_mean: float
    overhead_p50: float
    overhead_p99: float
    executor_mean: float
    tuples_mean: float
    batch_size_mean: float
    hit_rate: float
    retractions: int


def tuple_baseline_us(repeats: int = 2000) -> float:
    """Mean time to build a list of 256 plain 5-tuples describing a batch."""
    table = list(range(64))
    t0 = time.perf_counter_ns()
    for _ in range(repeats):
        batch = [(i, i, 1, table, True) for i in range(RUNNING)]
    del batch
    return (time.perf_counter_ns() - t0) / repeats / 1000


def measure(
    scheduler: Scheduler, executor: TimedFakeExecutor, steps: int, refill: Callable[[], None]
) -> tuple[list[float], list[float], list[int]]:
    """Per-step (overhead, executor) times in µs and batch sizes over `steps` steps."""
    overheads, execs, sizes = [], [], []
    for _ in range(steps):
        refill()
        executor.ns = 0
        t0 = time.perf_counter_ns()
        events = scheduler.step()
        total = time.perf_counter_ns() - t0
        overheads.append((total - executor.ns) / 1000)
        execs.append(executor.ns / 1000)
        sizes.append(len(events))
    return overheads, execs, sizes


def decode_workload(page_size: int, steps: int) -> Figures:
    rng = random.Random(0)
    publish(Bags(schedule=ScheduleBag(page_size=page_size, max_running_requests=RUNNING)), role="standalone")
    executor = TimedFakeExecutor()
    slots = RUNNING * (128 + steps + 64) // page_size * page_size + RUNNING * page_size
    scheduler = Scheduler(executor, model_max_length=1 << 20, max_total_tokens=slots)
    stop = StopConditions(max_new_tokens=1 << 20, ignore_eos=True)
    for i in range(RUNNING):
        prompt = tuple(rng.randrange(VOCAB) for _ in range(128))
        scheduler.add_request(Request(rid=f"d{i}", prompt_ids=prompt, stop=stop))
    while scheduler.metrics().num_waiting:
        scheduler.step()
    scheduler.step()
    overheads, execs, sizes = measure(scheduler, executor, steps, lambda: None)
    return summarize(overheads, execs, sizes, scheduler)


def shared_workload(page_size: int, steps: int) -> Figures:
    rng = random.Random(1)
    publish(Bags(schedule=ScheduleBag(page_size=page_size, max_running_requests=RUNNING)), role="standalone")
    executor = TimedFakeExecutor()
    system = tuple(rng.randrange(VOCAB) for _ in range(512))
    slots = 512 + RUNNING * (32 + 160) * 2
    scheduler = Scheduler(executor, model_max_length=1 << 20, max_total_tokens=slots)
    count = 0

    def refill() -> None:
        nonlocal count
        metrics = scheduler.metrics()
        for _ in range(RUNNING - metrics.num_running - metrics.num_waiting):
            question = tuple(rng.randrange(VOCAB) for _ in range(32))
            stop = StopConditions(max_new_tokens=rng.randrange(32, 160), ignore_eos=True)
            scheduler.add_request(Request(rid=f"s{count}", prompt_ids=system + question, stop=stop))
            count += 1

    for _ in range(200):  # warm up to a steady state of arrivals and finishes
        refill()
        scheduler.step()
    overheads, execs, sizes = measure(scheduler, executor, steps, refill)
    return summarize(overheads, execs, sizes, scheduler)


def summarize(overheads: list[float], execs: list[float], sizes: list[int], scheduler: Scheduler) -> Figures:
    metrics = scheduler.metrics()
    unpublish()
    ordered = sorted(overheads)
    return Figures(
        overhead_mean=statistics.fmean(overheads),
        overhead_p50=ordered[len(ordered) // 2],
        overhead_p99=ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
        executor_mean=statistics.fmean(execs),
        tuples_mean=tuple_baseline_us(),
        batch_size_mean=statistics.fmean(sizes),
        hit_rate=metrics.cache_hit_rate,
        retractions=metrics.num_retractions,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300, help="timed steps per workload")
    parser.add_argument("--page-size", type=int, nargs="+", default=[1, 16], help="page sizes to run")
    args = parser.parse_args()
    print(f"load average before the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (p99 includes preemption)")
    print(
        "| workload | page_size | scheduler µs/step (mean / p50 / p99) | fake executor µs/step | "
        "256 tuples µs | p50 / 256 tuples | events/step | cache hit rate | retractions |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, run in (("decode", decode_workload), ("shared", shared_workload)):
        for page_size in args.page_size:
            f = run(page_size, args.steps)
            print(
                f"| {name} | {page_size} | {f.overhead_mean:.0f} / {f.overhead_p50:.0f} / {f.overhead_p99:.0f} | "
                f"{f.executor_mean:.0f} | {f.tuples_mean:.1f} | {f.overhead_p50 / f.tuples_mean:.0f}x | "
                f"{f.batch_size_mean:.0f} | {f.hit_rate:.2f} | {f.retractions} |"
            )


if __name__ == "__main__":
    main()
