"""Multi-turn benchmark of prefix reuse on a hybrid model: the same conversations served with
recurrent-state snapshots and without them, in one run.

    uv run python tools/build_hybrid_checkpoint.py --out /tmp/hybrid-220m
    uv run python tools/bench_hybrid_prefix.py --model-path /tmp/hybrid-220m

Each conversation opens with the same `--system-tokens` system prompt (random token ids) and runs
`--turns` turns: a turn's prompt is the conversation so far plus a new `--user-tokens` message, and
its answer (`--answer-tokens`, greedy, ignoring EOS) joins the conversation. Conversations run one
after another, turn by turn, streamed through /generate. Per turn: time to first token, prompt
tokens, and the tokens the server reused from its prefix cache (computed = prompt - reused). The
servers run the same flags but `--mamba-snapshot-memory-mb` (0: no snapshots, so no reuse), with the
snapshot interval and prefill chunk at `--interval`. Reported: TTFT p50 over the first turns (an
empty cache) and over the later turns, per setting, and the snapshot memory the server kept.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from serve_testing.server import ServerProcess


@dataclass(frozen=True)
class Turn:
    """What one turn measured."""

    index: int
    ttft_s: float
    prompt_tokens: int
    cached_tokens: int


def turn(url: str, prompt: list[int], answer_tokens: int) -> tuple[Turn, list[int]]:
    """One streamed /generate: its measures and its output ids."""
    body = {
        "input_ids": prompt,
        "stream": True,
        "sampling_params": {"max_new_tokens": answer_tokens, "temperature": 0, "ignore_eos": True},
    }
    sent = time.perf_counter()
    first: float | None = None
    ids: list[int] = []
    meta: dict[str, int] = {}
    with httpx.stream("POST", url + "/generate", json=body, timeout=3600) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            chunk = json.loads(line[6:])
            if chunk["output_ids"] and first is None:
                first = time.perf_counter()
            ids.extend(chunk["output_ids"])
            meta = chunk["meta_info"]
    assert first is not None, "no token came back"
    return Turn(0, first - sent, meta["prompt_tokens"], meta["cached_tokens"]), ids


def conversations(url: str, args: argparse.Namespace, vocab: int) -> list[Turn]:
    rng = random.Random(args.seed)
    system = [rng.randrange(10, vocab) for _ in range(args.system_tokens)]
    turns: list[Turn] = []
    for _ in range(args.conversations):
        history = list(system)
        for index in range(args.turns):
            history += [rng.randrange(10, vocab) for _ in range(args.user_tokens)]
            measured, answer = turn(url, history, args.answer_tokens)
            turns.append(Turn(index, measured.ttft_s, measured.prompt_tokens, measured.cached_tokens))
            history += answer
    return turns


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--model-path", type=Path, required=True, help="a hybrid checkpoint (tools/build_hybrid_checkpoint.py)"
    )
    p.add_argument("--system-tokens", type=int, default=1024)
    p.add_argument("--user-tokens", type=int, default=48)
    p.add_argument("--answer-tokens", type=int, default=32)
    p.add_argument("--turns", type=int, default=6)
    p.add_argument("--conversations", type=int, default=3)
    p.add_argument("--interval", type=int, default=256, help="snapshot interval and prefill chunk, tokens")
    p.add_argument("--snapshot-mb", type=float, default=256.0)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    common = ["--mamba-snapshot-interval", str(args.interval), "--chunked-prefill-size", str(args.interval)]
    results: dict[str, list[Turn]] = {}
    memory: dict[str, float] = {}
    for name, mb in (("no snapshots", 0.0), ("snapshots", args.snapshot_mb)):
        server = ServerProcess(args.model_path, *common, "--mamba-snapshot-memory-mb", str(mb))
        try:
            server.wait_ready(timeout_s=600)
            info = httpx.get(server.base_url + "/server_info", timeout=30).json()
            vocab = info["model"]["vocab_size"]
            memory[name] = info["model"]["recurrent_state_mb"]
            turn(server.base_url, [11, 12, 13], 2)  # warm-up
            results[name] = conversations(server.base_url, args, vocab)
        finally:
            server.stop()
    print("| setting | turn | TTFT p50 s | prompt tokens (mean) | reused (mean) | computed (mean) |")
    print("|---|---|---|---|---|---|")
    for name, turns in results.items():
        for label, chosen in (("first", [t for t in turns if t.index == 0]), ("later", [t for t in turns if t.index])):
            print(
                f"| {name} | {label} | {statistics.median(t.ttft_s for t in chosen):.3f} | "
                f"{statistics.mean(t.prompt_tokens for t in chosen):.0f} | "
                f"{statistics.mean(t.cached_tokens for t in chosen):.0f} | "
                f"{statistics.mean(t.prompt_tokens - t.cached_tokens for t in chosen):.0f} |"
            )
    later = {name: statistics.median(t.ttft_s for t in turns if t.index) for name, turns in results.items()}
    print(f"later turns: TTFT {later['no snapshots'] / later['snapshots']:.2f}x better with snapshots")
    print(
        f"recurrent state kept: {memory['snapshots']:.1f} MiB with snapshots, {memory['no snapshots']:.1f} MiB "
        "without (the running requests' state pool)"
    )


if __name__ == "__main__":
    main()
