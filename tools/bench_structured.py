"""Structured-output benchmark: what constraining the output to a JSON schema costs per token, and
what compiling a schema costs, against the same requests unconstrained, in one run.

    uv run python tools/bench_structured.py            # launches the default model's server

Decode: the same chat requests (greedy, `max_tokens` tokens each) run with a `json_schema`
response_format and without one, at 1 and at `--concurrency` requests in flight, in interleaved
rounds; each request streams, and its decode rate is its tokens after the first over the time from
its first token to its last. Throughput is all output tokens over the round's wall time. The
unconstrained requests ignore EOS so that both sides decode about the same number of tokens (the
schema asks for a long array, so a constrained answer runs to `max_tokens`, or close).
Compile: the time the server's grammar engine spent on one schema it had not seen (from /metrics'
`serve_grammar_compile_seconds_total`), and a request's time to first token with a new schema,
with the same schema again (compiled grammar cached) and without a schema.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from serve_testing.polling import first_satisfying
from serve_testing.prometheus import metric_value
from serve_testing.server import ServerProcess

PROMPT = "List the names of many fruits and vegetables as a JSON object."


def schema_of(tag: str) -> dict[str, Any]:
    """A typical extraction schema (an array of short records); `tag` names one property, so that
    each tag is a schema the server has not compiled yet."""
    return {
        "type": "object",
        "properties": {
            "items": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {"name": {"type": "string", "maxLength": 16}, tag: {"type": "integer"}},
                    "required": ["name", tag],
                    "additionalProperties": False,
                },
                "minItems": 32,
            },
            "total": {"type": "integer"},
        },
        "required": ["items", "total"],
        "additionalProperties": False,
    }


@dataclass
class Timing:
    """One streamed request."""

    sent: float
    token_times: list[float] = field(default_factory=list)
    tokens: int = 0


async def one(client: httpx.AsyncClient, max_tokens: int, schema: dict[str, Any] | None) -> Timing:
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if schema is None:
        body["ignore_eos"] = True
    else:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "bench", "schema": schema}}
    timing = Timing(sent=time.perf_counter())
    async with client.stream("POST", "/v1/chat/completions", json=body) as response:
        response.raise_for_status()
        async for line in response.aiter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                timing.tokens = chunk["usage"]["completion_tokens"]
            if any(c.get("delta", {}).get("content") for c in chunk.get("choices", ())):
                timing.token_times.append(time.perf_counter())
    return timing


async def round_of(url: str, n: int, max_tokens: int, schema: dict[str, Any] | None) -> dict[str, float]:
    """`n` requests at once: output throughput (tokens/s), median per-request decode rate, median TTFT."""
    async with httpx.AsyncClient(base_url=url, timeout=3600, limits=httpx.Limits(max_connections=n + 4)) as client:
        start = time.perf_counter()
        timings = await asyncio.gather(*(one(client, max_tokens, schema) for _ in range(n)))
    end = max(t.token_times[-1] for t in timings)
    rates = [(t.tokens - 1) / (t.token_times[-1] - t.token_times[0]) for t in timings if len(t.token_times) > 1]
    return {
        "throughput": sum(t.tokens for t in timings) / (end - start),
        "decode_rate": statistics.median(rates),
        "ttft_s": statistics.median(t.token_times[0] - t.sent for t in timings),
        "tokens": statistics.mean(t.tokens for t in timings),
    }


def engine_counts(url: str) -> tuple[float, float]:
    """The grammar engine's compiles and compile seconds so far, from /metrics."""
    text = httpx.get(url + "/metrics").text
    return metric_value(text, "serve_grammar_compiles_total"), metric_value(text, "serve_grammar_compile_seconds_total")


def _counted_past(compiles: float, counts: tuple[float, float]) -> bool:
    return counts[0] > compiles


def compile_figures(url: str, rounds: int) -> dict[str, float]:
    """Median over `rounds` new schemas: the engine's compile time, and TTFT cold, cached and free."""
    compile_s: list[float] = []
    cold: list[float] = []
    cached: list[float] = []
    free: list[float] = []
    for i in range(rounds):
        schema = schema_of(f"count_{i}_{time.time_ns()}")
        compiles, seconds = engine_counts(url)
        cold.append(asyncio.run(round_of(url, 1, 2, schema))["ttft_s"])
        # The scheduler reports its counts a few times a second: read until this compile shows.
        after = first_satisfying(lambda: engine_counts(url), functools.partial(_counted_past, compiles))
        compile_s.append(after[1] - seconds)
        cached.append(asyncio.run(round_of(url, 1, 2, schema))["ttft_s"])
        free.append(asyncio.run(round_of(url, 1, 2, None))["ttft_s"])
    return {
        "compile_s": statistics.median(compile_s),
        "ttft_cold_s": statistics.median(cold),
        "ttft_cached_s": statistics.median(cached),
        "ttft_free_s": statistics.median(free),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model-path", type=Path, help="checkpoint to serve (default: the default model)")
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--max-tokens", type=int, default=128)
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds per setting (medians reported)")
    p.add_argument("--serve-flag", action="append", default=[], help="extra flag for the server (repeatable)")
    args = p.parse_args()
    flags = [f for flag in args.serve_flag for f in flag.split("=", 1)]
    server = ServerProcess(args.model_path, *flags)
    try:
        server.wait_ready(timeout_s=600)
        url = server.base_url
        schema = schema_of("count")
        asyncio.run(round_of(url, 4, 8, schema))  # warm-up, and the schema compiled
        results: dict[tuple[int, str], list[dict[str, float]]] = {}
        for _ in range(args.rounds):
            for n in (1, args.concurrency):
                for name, constraint in (("free", None), ("json_schema", schema)):
                    results.setdefault((n, name), []).append(asyncio.run(round_of(url, n, args.max_tokens, constraint)))
        compiles = compile_figures(url, args.rounds)
    finally:
        server.stop()
    print("| in flight | output | tokens/request | throughput tok/s | decode tok/s per request | TTFT p50 s |")
    print("|---|---|---|---|---|---|")
    medians: dict[tuple[int, str], dict[str, float]] = {}
    for (n, name), runs in results.items():
        medians[n, name] = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        m = medians[n, name]
        print(
            f"| {n} | {name} | {m['tokens']:.0f} | {m['throughput']:.1f} | {m['decode_rate']:.1f} | {m['ttft_s']:.3f} |"
        )
    for n in (1, args.concurrency):
        ratio = medians[n, "json_schema"]["throughput"] / medians[n, "free"]["throughput"]
        print(f"{n} in flight: json_schema throughput {ratio:.2f}x unconstrained ({(1 - ratio) * 100:+.1f}% slower)")
    print(
        f"compile of a new schema: {compiles['compile_s'] * 1000:.1f} ms in the engine; TTFT new schema "
        f"{compiles['ttft_cold_s'] * 1000:.0f} ms, cached {compiles['ttft_cached_s'] * 1000:.0f} ms, "
        f"no schema {compiles['ttft_free_s'] * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
