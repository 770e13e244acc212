"""Where a served stream's time goes: one stream decoded by the runner alone and by the server, in
the same run, with every process's CPU time per output token.

    uv run python tools/profile_served_stream.py [--rounds 3] [--output-len 256] [--serve-flag=--FLAG=VALUE]

Each round runs the same request twice, one after the other:
- alone: the server's own scheduler and runner (built from the running server's bags, as
  tools/bench_serving.py's --in-process builds them) in this process, no HTTP, tokenizer,
  detokenizer or ipc;
- served: one streamed /v1/completions request to the server (`ignore_eos`, greedy).
The decode rate of each is (tokens after the first) / (time from the first token to the last).
Over the served request it reads the CPU seconds (user + system, all threads, from /proc) of each
of the server's processes (/server_info names them) and of this client, and prints them per output
token: what runs beside the forward on the same cores.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
from bench_serving import (  # run as a script, its sibling tools import by name
    Job,
    request_of,
    run_server,
    scheduler_in_process,
    workload,
)

CLOCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process `pid` so far, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK  # utime and stime, fields 14 and 15 of stat


def client_cpu_seconds() -> float:
    """This process's own user + system CPU seconds so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def decode_rate(first: float, last: float, tokens: int) -> float:
    """Tokens after the first per second between the first token and the last."""
    return (tokens - 1) / (last - first)


def served(url: str, model: str, job: Job, pids: dict[str, int]) -> tuple[float, dict[str, float]]:
    """The served decode rate of `job` and each process's CPU milliseconds per output token."""
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    client_before = client_cpu_seconds()
    (timing,), _ = asyncio.run(run_server(url, model, [job], 1, float("inf"), 0))
    cpu = {name: (cpu_seconds(pid) - before[name]) * 1000 / timing.tokens for name, pid in pids.items()}
    cpu["client (this tool)"] = (client_cpu_seconds() - client_before) * 1000 / timing.tokens
    if timing.tokens != job.output_len:
        raise RuntimeError(f"asked for {job.output_len} tokens and got {timing.tokens}")
    return decode_rate(timing.token_times[0], timing.token_times[-1], timing.tokens), cpu


class Alone:
    """The server's scheduler and runner in this process, with the server's bags."""

    def __init__(self, bags_json: dict[str, Any]) -> None:
        self.scheduler = scheduler_in_process(bags_json)
        self.count = 0

    def rate(self, job: Job) -> float:
        """The decode rate of `job` run alone."""
        self.count += 1
        self.scheduler.add_request(request_of(job, f"alone{self.count}"))
        stamps: list[float] = []
        while self.scheduler.has_work():
            for event in self.scheduler.step():
                if event.token_id is not None:
                    stamps.append(time.perf_counter())
        return decode_rate(stamps[0], stamps[-1], len(stamps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--output-len", type=int, default=256)
    parser.add_argument("--serve-flag", action="append", default=[], help="a flag for the server, --serve-flag=--X=Y")
    args = parser.parse_args()
    from serve_testing.server import ServerProcess

    flags = [part for flag in args.serve_flag for part in flag.split("=", 1)]
    server = ServerProcess(None, *flags)
    try:
        server.wait_ready(timeout_s=600)
        info = httpx.get(server.base_url + "/server_info", timeout=30).json()
        model = httpx.get(server.base_url + "/v1/models", timeout=30).json()["data"][0]["id"]
        pids = {name: int(pid) for name, pid in info["pids"].items() if pid is not None}
        alone = Alone(info["bags"])
        jobs = workload(args.rounds + 1, (args.prompt_len, args.prompt_len), (args.output_len,) * 2, (100, 20000), 0)
        alone.rate(jobs[0])  # warm-up, both ways
        served(server.base_url, model, jobs[0], pids)
        rates: dict[str, list[float]] = {"alone": [], "served": []}
        cpus: list[dict[str, float]] = []
        for round_, job in enumerate(jobs[1:], 1):
            rates["alone"].append(alone.rate(job))
            rate, cpu = served(server.base_url, model, job, pids)
            rates["served"].append(rate)
            cpus.append(cpu)
            print(
                f"round {round_}: alone {rates['alone'][-1]:.1f} tok/s, served {rate:.1f} tok/s "
                f"({rate / rates['alone'][-1]:.0%}); CPU ms/token: "
                + ", ".join(f"{name} {ms:.2f}" for name, ms in cpu.items()),
                flush=True,
            )
    finally:
        server.stop()
    alone_rate, served_rate = statistics.median(rates["alone"]), statistics.median(rates["served"])
    # Each round's two runs are back to back: their ratio is paired, steadier than a ratio of medians
    # on a machine whose speed drifts between rounds.
    ratio = statistics.median(s / a for s, a in zip(rates["served"], rates["alone"], strict=True))
    print(
        f"\nmedian of {args.rounds}: alone {alone_rate:.1f} tok/s ({1000 / alone_rate:.2f} ms/token), served "
        f"{served_rate:.1f} tok/s ({1000 / served_rate:.2f} ms/token); served/alone per round, median {ratio:.0%}"
    )
    print(
        "CPU per output token, median (ms): "
        + ", ".join(f"{name} {statistics.median(c[name] for c in cpus):.2f}" for name in cpus[0])
    )


if __name__ == "__main__":
    main()
