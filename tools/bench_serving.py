"""Serving benchmark: a mixed workload against any OpenAI-compatible server, and the same requests
through transformers `generate` as the baseline, side by side in one run.

    uv run python tools/bench_serving.py --launch --baseline --in-process   # default model, 32 concurrent
    uv run python tools/bench_serving.py --url http://127.0.0.1:30000 --model NAME --model-path DIR

Each request is a prompt of random token ids (exact lengths) and a fixed number of output tokens
(`ignore_eos`), so every run generates the same work. The server side streams /v1/completions and
records, per request, the time of its first token (TTFT) and the gaps between later tokens
(inter-token latency); output throughput is all output tokens over the wall time from the first
send to the last token. The baseline runs the same requests through `generate` in static batches
of `--concurrency` (left-padded, every request of a batch run to the batch's longest output, only
the requested tokens counted). With --in-process the same jobs also run straight through the
server's scheduler and runner in the benchmark's process, with the server's bags: what the HTTP,
tokenizer, detokenizer and ipc layers cost is the gap between that and the served figure.
With --compare-flag (and --launch) a second server is launched after the first with those flags
added, and the same jobs run against it: two settings side by side in one run, e.g.
`--compare-flag=--enable-deterministic-inference=false`.
Prints a table, and writes a PNG with the runs when --plot is set.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from runtime_scheduler import ModelExecutor, Request, Scheduler


@dataclass(frozen=True)
class Job:
    """One request of the workload."""

    prompt_ids: tuple[int, ...]
    output_len: int


@dataclass
class Timing:
    """What one streamed request measured."""

    sent: float
    token_times: list[float] = field(default_factory=list)
    tokens: int = 0


def workload(
    n: int, prompt_range: tuple[int, int], output_range: tuple[int, int], vocab: tuple[int, int], seed: int
) -> list[Job]:
    """`n` jobs with uniformly drawn prompt and output lengths and random prompt token ids."""
    rng = random.Random(seed)
    return [
        Job(tuple(rng.randrange(*vocab) for _ in range(rng.randint(*prompt_range))), rng.randint(*output_range))
        for _ in range(n)
    ]


async def _one(client: httpx.AsyncClient, model: str, job: Job, gate: asyncio.Semaphore) -> Timing:
    async with gate:
        body = {
            "model": model,
            "prompt": list(job.prompt_ids),
            "max_tokens": job.output_len,
            "temperature": 0.0,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        timing = Timing(sent=time.perf_counter())
        async with client.stream("POST", "/v1/completions", json=body) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data: {"):
                    continue
                chunk = json.loads(line[6:])
                if "error" in chunk:
                    raise RuntimeError(f"the server failed a request mid-stream: {chunk['error']['message']}")
                if chunk.get("usage"):
                    timing.tokens = chunk["usage"]["completion_tokens"]
                if any(c.get("text") for c in chunk.get("choices", ())):
                    timing.token_times.append(time.perf_counter())
        return timing


async def run_server(
    url: str, model: str, jobs: list[Job], concurrency: int, rate: float, seed: int
) -> tuple[list[Timing], float]:
    """Send every job (Poisson arrivals at `rate` per second, or all at once when rate is inf),
    at most `concurrency` in flight; the timings and the wall time."""
    gate = asyncio.Semaphore(concurrency)
    rng = random.Random(seed + 1)
    limits = httpx.Limits(max_connections=concurrency + 4)
    async with httpx.AsyncClient(base_url=url, timeout=3600, limits=limits) as client:
        start = time.perf_counter()
        tasks = []
        for job in jobs:
            tasks.append(asyncio.create_task(_one(client, model, job, gate)))
            if rate != float("inf"):
                await asyncio.sleep(rng.expovariate(rate))
        timings = await asyncio.gather(*tasks)
    end = max(t.token_times[-1] for t in timings if t.token_times)
    return list(timings), end - start


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p90 and p99 of `values` (seconds)."""
    if not values:
        return {"p50": float("nan"), "p90": float("nan"), "p99": float("nan")}
    cuts = statistics.quantiles(values, n=100, method="inclusive") if len(values) > 1 else [values[0]] * 99
    return {"p50": cuts[49], "p90": cuts[89], "p99": cuts[98]}


def server_summary(timings: list[Timing], wall: float) -> dict[str, Any]:
    """Output throughput and latency percentiles of a server run."""
    ttft = [t.token_times[0] - t.sent for t in timings if t.token_times]
    # A streamed chunk may carry several tokens; spread its gap over them.
    itl: list[float] = []
    for t in timings:
        gaps = [b - a for a, b in zip(t.token_times, t.token_times[1:], strict=False)]
        chunks = max(1, len(t.token_times) - 1)
        per_chunk = max(1, (t.tokens - 1)) / chunks
        itl.extend(g / per_chunk for g in gaps)
    tokens = sum(t.tokens for t in timings)
    return {
        "output_tokens": tokens,
        "wall_s": wall,
        "output_throughput": tokens / wall,
        "ttft_s": percentiles(ttft),
        "itl_s": percentiles(itl),
    }


def run_baseline(model_path: str, jobs: list[Job], batch_size: int, dtype: str, threads: int | None) -> dict[str, Any]:
    """The same jobs through transformers `generate`, in static left-padded batches."""
    import importlib

    import torch

    transformers: Any = importlib.import_module("transformers")  # its stubs mistype generate()
    if threads:
        torch.set_num_threads(threads)
    model = transformers.AutoModelForCausalLM.from_pretrained(
        model_path, dtype=getattr(torch, dtype)
    )  # loads in eval mode
    pad = model.config.pad_token_id if model.config.pad_token_id is not None else 0
    useful = 0
    start = time.perf_counter()
    for first in range(0, len(jobs), batch_size):
        batch = jobs[first : first + batch_size]
        width = max(len(j.prompt_ids) for j in batch)
        ids = torch.tensor([[pad] * (width - len(j.prompt_ids)) + list(j.prompt_ids) for j in batch])
        mask = torch.tensor([[0] * (width - len(j.prompt_ids)) + [1] * len(j.prompt_ids) for j in batch])
        longest = max(j.output_len for j in batch)
        with torch.inference_mode():
            model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=longest,
                min_new_tokens=longest,
                do_sample=False,
                pad_token_id=pad,
            )
        useful += sum(j.output_len for j in batch)
    wall = time.perf_counter() - start
    return {"output_tokens": useful, "wall_s": wall, "output_throughput": useful / wall}


@dataclass
class StepTimes:
    """Forward time of the in-process run, by kind of step: (steps, seconds, decoded tokens, prompt tokens)."""

    kinds: dict[str, list[float]] = field(default_factory=dict)

    def add(self, kind: str, seconds: float, decodes: int, prompt_tokens: int) -> None:
        row = self.kinds.setdefault(kind, [0, 0.0, 0, 0])
        row[0] += 1
        row[1] += seconds
        row[2] += decodes
        row[3] += prompt_tokens


class TimedExecutor:
    """The runner as the scheduler's executor, timing each forward by what its batch holds."""

    def __init__(self, runner: Any, times: StepTimes) -> None:
        self._runner = runner
        self._times = times

    def forward(self, batch: Any) -> Any:
        started = time.perf_counter()
        out = self._runner.forward(batch)
        seconds = time.perf_counter() - started
        decodes = sum(1 for r in batch.requests if r.extend_len == 1)
        prompt = sum(r.extend_len for r in batch.requests if r.extend_len > 1)
        kind = (
            "prefill+decode"
            if decodes and prompt
            else "prefill"
            if prompt
            else f"decode, batch {-(-decodes // 8) * 8 - 7}-{-(-decodes // 8) * 8}"
        )
        self._times.add(kind, seconds, decodes, prompt)
        return out


def scheduler_in_process(
    bags_json: dict[str, Any], executor_of: Callable[[ModelExecutor], ModelExecutor] | None = None
) -> Scheduler:
    """The server's scheduler (and runner) built in this process from the server's own bags (as
    /server_info gives them), published here; `executor_of` may wrap its executor."""
    import msgspec

    import config_bags
    from serve.scheduler_process.process import build_scheduler

    config_bags.publish(msgspec.convert(bags_json, config_bags.server.Bags), role="standalone")
    scheduler, _runner = build_scheduler() if executor_of is None else build_scheduler(executor_of)
    return scheduler


def request_of(job: Job, rid: str) -> Request:
    """`job` as the scheduler's request: greedy, exactly its output_len tokens (ignore_eos)."""
    from runtime_scheduler import Request, SamplingParams, StopConditions

    stop = StopConditions(max_new_tokens=job.output_len, ignore_eos=True)
    return Request(rid=rid, prompt_ids=job.prompt_ids, sampling=SamplingParams(), stop=stop)


def run_in_process(bags_json: dict[str, Any], jobs: list[Job], concurrency: int) -> dict[str, Any]:
    """The same jobs straight through the server's scheduler and runner in this process (no HTTP,
    no tokenizer or detokenizer, no ipc), at most `concurrency` live, with the server's own bags:
    the difference to the served run is what the serving layers cost. Each forward is timed by
    the kind of step it was (decode only, prefill only, both)."""
    import config_bags

    times = StepTimes()
    scheduler = scheduler_in_process(bags_json, lambda runner: TimedExecutor(runner, times))  # as serve builds it

    def drain(batch: list[Job], tag: str) -> int:
        pending = list(enumerate(batch))
        live = tokens = 0
        while pending or scheduler.has_work():
            while pending and live < concurrency:
                index, job = pending.pop(0)
                scheduler.add_request(request_of(job, f"{tag}{index}"))
                live += 1
            for event in scheduler.step():
                tokens += event.token_id is not None
                live -= event.finish_reason is not None
        return tokens

    drain(jobs[: min(4, len(jobs))], "warm")  # as the served run warms up
    times.kinds.clear()
    start = time.perf_counter()
    tokens = drain(jobs, "job")
    wall = time.perf_counter() - start
    config_bags.unpublish()
    return {"output_tokens": tokens, "wall_s": wall, "output_throughput": tokens / wall, "steps": times.kinds}


def plot(timings: list[Timing], summary: dict[str, Any], baseline: dict[str, Any] | None, path: Path) -> None:
    """Per-request TTFT and mean inter-token latency, and throughput against the baseline."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, middle, right) = plt.subplots(1, 3, figsize=(15, 4.5))
    ordered = sorted(timings, key=lambda t: t.sent)
    t0 = ordered[0].sent
    for t in ordered:
        if t.token_times:
            left.plot(
                [t.sent - t0, t.token_times[0] - t0], [t.token_times[0] - t.sent] * 2, color="tab:blue", alpha=0.6
            )
    left.set(
        title="TTFT per request (line: send to first token)", xlabel="time since first send (s)", ylabel="TTFT (s)"
    )
    gaps = [b - a for t in timings for a, b in zip(t.token_times, t.token_times[1:], strict=False)]
    middle.hist(gaps, bins=40, color="tab:orange")
    middle.set(title="inter-chunk gaps", xlabel="seconds", ylabel="count")
    names, values = ["serve"], [summary["output_throughput"]]
    if baseline is not None:
        names.append("transformers generate")
        values.append(baseline["output_throughput"])
    right.bar(names, values, color=["tab:green", "tab:gray"][: len(names)])
    right.set(title="output throughput", ylabel="tokens/s")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _range(text: str) -> tuple[int, int]:
    low, high = (int(x) for x in text.split(":"))
    if not 1 <= low <= high:
        raise argparse.ArgumentTypeError(f"range {text!r}: expected LOW:HIGH with 1 <= LOW <= HIGH")
    return low, high


def main() -> None:
    """Run the benchmark described by the command line and print the figures."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", help="base URL of a running OpenAI-compatible server")
    p.add_argument(
        "--launch", action="store_true", help="start `serve` on --model-path (default model when unset) for the run"
    )
    p.add_argument("--model", help="model name to send (default: the server's first /v1/models entry)")
    p.add_argument("--model-path", help="checkpoint directory (baseline; and --launch)")
    p.add_argument(
        "--serve-flag",
        action="append",
        default=[],
        help="extra flag for the launched server, e.g. --serve-flag=--max-total-tokens=65536",
    )
    p.add_argument(
        "--compare-flag",
        action="append",
        default=[],
        help="with --launch: launch again with this flag added and run the same jobs (repeatable)",
    )
    p.add_argument("--num-requests", type=int, default=64)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument(
        "--request-rate", type=float, default=float("inf"), help="requests per second (Poisson); inf sends all at once"
    )
    p.add_argument("--prompt-len", type=_range, default=(32, 256), help="prompt tokens LOW:HIGH")
    p.add_argument("--output-len", type=_range, default=(32, 160), help="output tokens LOW:HIGH")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--baseline", action="store_true", help="also run the jobs through transformers generate")
    p.add_argument(
        "--in-process",
        action="store_true",
        help=(
            "also run the jobs through the scheduler and runner in this process (needs --launch or this project's "
            "server)"
        ),
    )
    p.add_argument("--baseline-dtype", default="bfloat16", choices=["bfloat16", "float32", "float16"])
    p.add_argument("--threads", type=int, help="torch threads for the baseline")
    p.add_argument("--plot", type=Path, help="write a PNG here")
    args = p.parse_args()

    if args.compare_flag and not args.launch:
        p.error("--compare-flag launches a second server: add --launch")
    model_path = args.model_path
    flags = [f for flag in args.serve_flag for f in flag.split("=", 1)]
    compared = [f for flag in args.compare_flag for f in flag.split("=", 1)]
    launches = [flags, flags + compared] if compared else [flags]
    runs: list[tuple[list[str], list[Timing], float]] = []
    server_bags = None
    jobs: list[Job] = []
    for launch_flags in launches if args.launch else [[]]:
        server = None
        if args.launch:
            from serve_testing.server import ServerProcess

            server = ServerProcess(Path(model_path) if model_path else None, *launch_flags)
            server.wait_ready(timeout_s=600)
            url = server.base_url
        elif args.url:
            url = args.url
        else:
            p.error("give --url of a running server or --launch")
        try:
            info = httpx.get(url + "/v1/models", timeout=30).json()["data"][0]
            model = args.model or info["id"]
            own = httpx.get(url + "/server_info", timeout=30)  # this project's server says more about itself
            if server_bags is None:
                server_bags = own.json()["bags"] if own.status_code == 200 else None
            vocab_high = min(20000, own.json()["model"]["vocab_size"]) if own.status_code == 200 else 20000
            if model_path is None and own.status_code == 200:
                model_path = own.json()["bags"]["model"]["model_path"]
            jobs = workload(
                args.num_requests, args.prompt_len, args.output_len, (min(100, vocab_high // 2), vocab_high), args.seed
            )
            asyncio.run(
                run_server(url, model, jobs[: min(4, len(jobs))], args.concurrency, float("inf"), args.seed)
            )  # warm-up
            timings, wall = asyncio.run(run_server(url, model, jobs, args.concurrency, args.request_rate, args.seed))
        finally:
            if server is not None:
                server.stop()
        runs.append((launch_flags, timings, wall))
    _, timings, wall = runs[0]
    summary = server_summary(timings, wall)
    in_process = None
    if args.in_process:
        if server_bags is None or args.request_rate != float("inf"):
            p.error("--in-process needs this project's server (for its bags) and all requests at once")
        in_process = run_in_process(server_bags, jobs, args.concurrency)
    baseline = None
    if args.baseline:
        if model_path is None:
            p.error("--baseline needs --model-path (or --launch)")
        baseline = run_baseline(model_path, jobs, args.concurrency, args.baseline_dtype, args.threads)
    print(
        f"workload: {args.num_requests} requests, prompt {args.prompt_len[0]}-{args.prompt_len[1]} tokens, "
        f"output {args.output_len[0]}-{args.output_len[1]} tokens, concurrency {args.concurrency}, rate "
        f"{args.request_rate}/s"
    )
    print(
        f"serve:     {summary['output_throughput']:8.1f} output tok/s  ({summary['output_tokens']} tokens in "
        f"{summary['wall_s']:.1f} s)"
    )
    for name in ("ttft_s", "itl_s"):
        q = summary[name]
        print(
            f"           {name[:-2]:>4} p50 {q['p50'] * 1000:8.1f} ms   p90 {q['p90'] * 1000:8.1f} ms   p99 "
            f"{q['p99'] * 1000:8.1f} ms"
        )
    for launch_flags, other_timings, other_wall in runs[1:]:
        other = server_summary(other_timings, other_wall)
        print(f"serve {' '.join(launch_flags[len(flags) :])}:")
        print(
            f"           {other['output_throughput']:8.1f} output tok/s  ({other['output_tokens']} tokens in "
            f"{other['wall_s']:.1f} s), "
            f"{summary['output_throughput'] / other['output_throughput']:.2f}x of it without those flags"
        )
        for name in ("ttft_s", "itl_s"):
            q = other[name]
            print(
                f"           {name[:-2]:>4} p50 {q['p50'] * 1000:8.1f} ms   p90 {q['p90'] * 1000:8.1f} ms   p99 "
                f"{q['p99'] * 1000:8.1f} ms"
            )
    if in_process is not None:
        print(
            f"in-process:{in_process['output_throughput']:8.1f} output tok/s  ({in_process['output_tokens']} tokens in "
            f"{in_process['wall_s']:.1f} s, "
            "the server's scheduler and runner without HTTP, tokenizer, detokenizer or ipc)"
        )
        for kind, (steps, seconds, decodes, prompt) in sorted(
            in_process["steps"].items(), key=lambda item: (not item[0].startswith("decode"), len(item[0]), item[0])
        ):
            print(
                f"           {kind:>18}: {steps:4d} steps, {seconds:5.1f} s, {seconds / steps * 1000:6.1f} ms/step, "
                f"{decodes:5d} decoded + {prompt:5d} prompt tokens"
            )
    if baseline is not None:
        print(
            f"baseline:  {baseline['output_throughput']:8.1f} output tok/s  ({baseline['output_tokens']} tokens in "
            f"{baseline['wall_s']:.1f} s, "
            f"transformers generate, {args.baseline_dtype}, static batches of {args.concurrency})"
        )
        print(f"ratio:     {summary['output_throughput'] / baseline['output_throughput']:.2f}x")
    if args.plot:
        plot(timings, summary, baseline, args.plot)
        print(f"plot:      {args.plot}")


if __name__ == "__main__":
    main()
