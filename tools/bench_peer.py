"""CPU peer benchmark: the same workload against our server, llama.cpp's llama-server (on a bf16 GGUF
of the default model and on its shipped Q4_1 GGUF) and transformers `generate`, side by side.

    uv run python tools/bench_peer.py                     # build what is missing, then the default run
    uv run python tools/bench_peer.py --engines ours llama-bf16 --concurrency 1 32 --repeat 5
    uv run python tools/bench_peer.py --ours 'q4=--model-path /path/SmolLM2-135M-Instruct.Q4_1.gguf'
    uv run python tools/bench_peer.py --engines ours-q4km llama-q4km --ours 'q4km=--model-path F.gguf' \
        --llama q4km=F.gguf --floor q4km=F.gguf          # any GGUF file, on both servers

Engines: `ours` (`serve` on the default model with its default flags, started from this venv as
`python -m serve.main`, which is what `uv run serve` runs), `ours-NAME` for each `--ours
NAME=FLAGS` (another configuration of our server), `llama-bf16` and `llama-q4_1` (llama-server
on those files of the default model), `llama-NAME` for each `--llama NAME=FILE` (llama-server on
any GGUF file), and `transformers` (`generate` in this process, bf16, static batches of the
concurrency). Every llama-server runs with as many threads as ours, 32 slots sharing a unified
32k-token KV cache and continuous batching; it is built once per machine by
tools/llama_cpp_peer.py, which the first run does (10 minutes or more on 2 cores).
The bf16 GGUF holds the very weights our server and transformers serve: each is the shipped Q4_1
file de-quantized and rounded to bf16.

Workload: every request is a prompt of random token ids of exactly --prompt-len tokens and asks for
exactly --output-len tokens (greedy, `ignore_eos`; the tool checks each answer's count), streamed
from /v1/completions. Prompts are cold: each (round, engine, level) draws new ids, so no prefix
cache helps anyone; each engine is warmed up on other prompts after it starts.

Concurrency: at level C the tool sends C x --waves requests keeping C in flight (a new request is
sent the moment one finishes). With fixed lengths the C requests start together and finish
together, so in effect it sends --waves bursts of C. transformers runs the same requests as
--waves static batches of C; each request's TTFT is then its batch's time to the first token.

Figures per engine and level: output tok/s (all output tokens / wall time from the first send to
the last token), TTFT p50 and p90 over the level's requests, and at C = 1 the batch-1 decode rate
(tokens after the first / time from the first token to the last). After the rounds, with every
engine stopped, it measures the weight-read floor of the default model's bf16 and Q4_1 weights as
our runner holds them (tools/weight_read_floor.py), to set the batch-1 rates against; each `--floor
NAME=MODEL` names another model to measure instead (a directory or a GGUF file).

Rounds: --repeat rounds, each running every engine (in the same order) at every level; an engine
is started for its turn and stopped after it, so it runs alone on the machine. The table gives the
median over rounds and, with more than one, the min-max. It is printed, and written with the
machine, the versions and this command line to --markdown; --plot draws output tok/s and TTFT p50
against concurrency; --json keeps every round's figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import signal
import statistics
import subprocess
import sys
import time
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import httpx
import llama_cpp_peer  # run as a script, its sibling tools import by name
from bench_serving import Job, Timing, percentiles, run_server, workload

ROOT = Path(__file__).resolve().parent.parent
VOCAB = (100, 49152)  # the default model's vocabulary, less its low ids where the special tokens lie
LLAMA_FILES = {"llama-bf16": "bf16", "llama-q4_1": "q4_1"}


@dataclass(frozen=True)
class Settings:
    """What every engine is asked to do, from the command line."""

    prompt_len: int
    output_len: int
    waves: int
    warmup: int
    threads: int
    seed: int


@dataclass(frozen=True)
class Figures:
    """What one engine measured at one concurrency level in one round."""

    engine: str
    concurrency: int
    round: int
    requests: int
    output_tokens: int
    wall_s: float
    output_tok_s: float
    ttft_p50_s: float
    ttft_p90_s: float
    decode_tok_s: float


def figures_of(
    engine: str,
    concurrency: int,
    round_: int,
    sent: list[float],
    first: list[float],
    last: list[float],
    tokens: list[int],
    wall: float,
) -> Figures:
    """The level's figures from each request's send, first- and last-token times and token count."""
    ttft = percentiles([f - s for s, f in zip(sent, first, strict=True)])
    decode_time = sum(b - a for a, b in zip(first, last, strict=True))
    return Figures(
        engine=engine,
        concurrency=concurrency,
        round=round_,
        requests=len(tokens),
        output_tokens=sum(tokens),
        wall_s=wall,
        output_tok_s=sum(tokens) / wall,
        ttft_p50_s=ttft["p50"],
        ttft_p90_s=ttft["p90"],
        decode_tok_s=sum(n - 1 for n in tokens) / decode_time if decode_time > 0 else float("nan"),
    )


def jobs_for(settings: Settings, count: int, output_len: int, *key: object) -> list[Job]:
    """`count` jobs of fresh random prompts, drawn from a seed of `key`: each (round, engine, level)
    gets prompts no other run has seen."""
    seed = zlib.crc32(repr((settings.seed, *key)).encode())
    length = (settings.prompt_len, settings.prompt_len)
    return workload(count, length, (output_len, output_len), VOCAB, seed)


class Engine(Protocol):
    """An engine under test: started by `with`, then measured at each level."""

    name: str

    def __enter__(self) -> Engine: ...

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None: ...

    def measure(self, jobs: list[Job], concurrency: int, round_: int) -> Figures: ...


# --- engines behind HTTP ----------------------------------------------------------------------


class HttpEngine:
    """An OpenAI-compatible server, measured through bench_serving's streaming client."""

    name: str
    base_url: str
    model: str

    def _connect(self) -> None:
        """Learn the model name the server answers to."""
        self.model = str(httpx.get(self.base_url + "/v1/models", timeout=30).json()["data"][0]["id"])

    def measure(self, jobs: list[Job], concurrency: int, round_: int) -> Figures:
        """Stream `jobs` at `concurrency` in flight; check each got the tokens it asked for."""
        timings, wall = asyncio.run(run_server(self.base_url, self.model, jobs, concurrency, float("inf"), 0))
        for job, timing in zip(jobs, timings, strict=True):
            if timing.tokens != job.output_len or not timing.token_times:
                raise RuntimeError(
                    f"{self.name}: a request asked for {job.output_len} tokens (ignore_eos) and got "
                    f"{timing.tokens} in {len(timing.token_times)} chunks"
                )
        return _figures_of_timings(self.name, concurrency, round_, timings, wall)

    def warm_up(self, jobs: list[Job]) -> None:
        """Run `jobs` once, all in flight, unmeasured."""
        asyncio.run(run_server(self.base_url, self.model, jobs, len(jobs), float("inf"), 0))


def _figures_of_timings(engine: str, concurrency: int, round_: int, timings: list[Timing], wall: float) -> Figures:
    return figures_of(
        engine,
        concurrency,
        round_,
        [t.sent for t in timings],
        [t.token_times[0] for t in timings],
        [t.token_times[-1] for t in timings],
        [t.tokens for t in timings],
        wall,
    )


class OursEngine(HttpEngine):
    """Our server, `serve` on the default model with `flags` added to its defaults."""

    def __init__(self, name: str, flags: list[str], settings: Settings) -> None:
        self.name = name
        self.flags = flags
        self.settings = settings
        self.server: Any = None

    def __enter__(self) -> OursEngine:
        from serve_testing.server import ServerProcess

        self.server = ServerProcess(None, *self.flags)  # its own session: stopped below as a group
        try:
            self.server.wait_ready(timeout_s=600)  # the first start on a machine also converts the model
            self.base_url = self.server.base_url
            self._connect()
            self.warm_up(jobs_for(self.settings, self.settings.warmup, 16, "warm-up", self.name))
        except BaseException:
            self._stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stop()

    def _stop(self) -> None:
        # SIGINT first, as an operator stops it; then whatever of its group is left is killed.
        llama_cpp_peer.stop_group(self.server.process, signal.SIGINT, timeout_s=30)


class LlamaEngine(HttpEngine):
    """llama-server on one GGUF file."""

    def __init__(self, name: str, build: llama_cpp_peer.PeerBuild, gguf: Path, settings: Settings) -> None:
        self.name = name
        self.build = build
        self.gguf = gguf
        self.settings = settings
        self.server: llama_cpp_peer.LlamaServer | None = None
        self.no_repack = False  # whether a round had to run it with --no-repack (llama_cpp_peer.started_server)

    def __enter__(self) -> LlamaEngine:
        self.server = llama_cpp_peer.started_server(self.build.binary, self.gguf, threads=self.settings.threads)
        self.no_repack = self.no_repack or llama_cpp_peer.NO_REPACK in self.server.command
        try:
            self.base_url = self.server.base_url
            self._connect()
            self.warm_up(jobs_for(self.settings, self.settings.warmup, 16, "warm-up", self.name))
        except BaseException:
            self.server.stop()
            raise
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.server is not None:
            self.server.stop()


# --- transformers -----------------------------------------------------------------------------


@dataclass
class StepClock:
    """Stamps the time each generate step ends: transformers asks its stopping criteria once per
    new token, so the first stamp is the batch's first token and the last its last."""

    stamps: list[float] = field(default_factory=list)

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        self.stamps.append(time.perf_counter())
        return torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)  # never stops a sequence


class TransformersEngine:
    """transformers `generate` in this process on the converted default model, bf16, static
    batches (left-padded, as tools/bench_serving.py's baseline runs it)."""

    def __init__(self, model_dir: Path, settings: Settings) -> None:
        self.name = "transformers"
        self.model_dir = model_dir
        self.settings = settings
        self.model: Any = None

    def __enter__(self) -> TransformersEngine:
        import importlib

        import torch

        transformers: Any = importlib.import_module("transformers")  # its stubs mistype generate()
        torch.set_num_threads(self.settings.threads)
        self.model = transformers.AutoModelForCausalLM.from_pretrained(self.model_dir, dtype=torch.bfloat16)
        warm = jobs_for(self.settings, self.settings.warmup, 16, "warm-up", self.name)
        self._generate(warm)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.model = None  # frees its memory before the next engine runs

    def _generate(self, batch: list[Job]) -> tuple[float, list[float]]:
        """Generate `batch` as one static batch; its start time and per-step stamps."""
        import torch
        from transformers import StoppingCriteriaList

        pad = self.model.config.pad_token_id if self.model.config.pad_token_id is not None else 0
        width = max(len(j.prompt_ids) for j in batch)
        ids = torch.tensor([[pad] * (width - len(j.prompt_ids)) + list(j.prompt_ids) for j in batch])
        mask = torch.tensor([[0] * (width - len(j.prompt_ids)) + [1] * len(j.prompt_ids) for j in batch])
        longest = max(j.output_len for j in batch)
        clock = StepClock()
        start = time.perf_counter()
        with torch.inference_mode():
            self.model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=longest,
                min_new_tokens=longest,
                do_sample=False,
                pad_token_id=pad,
                stopping_criteria=StoppingCriteriaList([clock]),
            )
        if len(clock.stamps) != longest:  # min_new_tokens should make every step count
            raise RuntimeError(f"transformers: generate ran {len(clock.stamps)} steps for {longest} tokens")
        return start, clock.stamps

    def measure(self, jobs: list[Job], concurrency: int, round_: int) -> Figures:
        """`jobs` in static batches of `concurrency`, one after the other; a request is "sent" when
        its batch starts, and only the tokens it asked for count."""
        sent: list[float] = []
        first: list[float] = []
        last: list[float] = []
        tokens: list[int] = []
        begin = time.perf_counter()
        for index in range(0, len(jobs), concurrency):
            batch = jobs[index : index + concurrency]
            start, stamps = self._generate(batch)
            for job in batch:
                sent.append(start)
                first.append(stamps[0])
                last.append(stamps[job.output_len - 1])
                tokens.append(job.output_len)
        return figures_of(self.name, concurrency, round_, sent, first, last, tokens, max(last) - begin)


# --- the run ----------------------------------------------------------------------------------


def build_engines(
    names: list[str],
    ours: dict[str, list[str]],
    llama: dict[str, Path],
    settings: Settings,
    threads_given: bool,
    transformers_model: Path | None,
) -> list[Engine]:
    """The engines named, in that order, with what each needs built or converted first."""
    from runtime_runner.loading.default_model import bundled_gguf, ensure_default_model

    model_dir = ensure_default_model()
    threads = ["--cpu-threads", str(settings.threads)] if threads_given else []  # else ours keeps its default
    engines: list[Engine] = []
    for name in names:
        if name == "ours" or name in ours:
            engines.append(OursEngine(name, threads + ours.get(name, []), settings))
        elif name in LLAMA_FILES:
            build = llama_cpp_peer.ensure_llama_server()
            gguf = bundled_gguf() if LLAMA_FILES[name] == "q4_1" else llama_cpp_peer.ensure_bf16_gguf(bundled_gguf())
            engines.append(LlamaEngine(name, build, gguf, settings))
        elif name in llama:
            engines.append(LlamaEngine(name, llama_cpp_peer.ensure_llama_server(), llama[name], settings))
        elif name == "transformers":
            engines.append(TransformersEngine(transformers_model or model_dir, settings))
        else:
            known = ["ours", *ours, *LLAMA_FILES, *llama, "transformers"]
            raise SystemExit(
                f"bench_peer: unknown engine {name!r} (known: {', '.join(known)}; ours-NAME comes with --ours "
                "NAME=FLAGS, llama-NAME with --llama NAME=FILE)"
            )
    return engines


def run_rounds(engines: list[Engine], levels: list[int], settings: Settings, repeat: int) -> list[Figures]:
    """Every round runs every engine at every level, in the same order; each engine starts for its
    turn and stops after it."""
    results: list[Figures] = []
    for round_ in range(repeat):
        for engine in engines:
            started = time.monotonic()
            with engine:
                for level in levels:
                    jobs = jobs_for(settings, level * settings.waves, settings.output_len, round_, engine.name, level)
                    got = engine.measure(jobs, level, round_)
                    results.append(got)
                    print(
                        f"round {round_ + 1}/{repeat} {engine.name:>14} c={level:<3} {got.output_tok_s:8.1f} out "
                        f"tok/s   TTFT p50 {got.ttft_p50_s * 1000:8.1f} ms  p90 {got.ttft_p90_s * 1000:8.1f} ms   "
                        f"decode {got.decode_tok_s:6.1f} tok/s/request",
                        flush=True,
                    )
            print(
                f"round {round_ + 1}/{repeat} {engine.name:>14} done in {time.monotonic() - started:.0f} s (with its "
                "start and warm-up)",
                flush=True,
            )
    return results


def weight_read_floors(threads: int, models: dict[str, Path]) -> dict[str, float]:
    """The batch-1 weight-read floor (tools/weight_read_floor.py) of each model as our server holds
    it (by default the default model from its bf16 conversion and from its bundled Q4_1 GGUF), with
    `threads` threads: the rate a decode step would reach if it only read its weights, to set the
    batch-1 rates against."""
    from weight_read_floor import weight_read_floor

    from attn_backends import build_attention_pair
    from config_bags import publish, unpublish
    from config_bags.server import Bags, MemoryBag, ModelBag, ScheduleBag
    from runtime_runner.loading.default_model import bundled_gguf, ensure_default_model
    from runtime_runner.runner import ModelRunner

    floors = {}
    for name, path in (models or {"bf16": ensure_default_model(), "q4_1": bundled_gguf()}).items():
        publish(
            Bags(
                model=ModelBag(model_path=str(path)),
                memory=MemoryBag(max_total_tokens=1024),
                schedule=ScheduleBag(chunked_prefill_size=1024, max_prefill_tokens=1024),
            ),
            role="standalone",
        )
        try:
            floors[name] = weight_read_floor(ModelRunner(build_attention_pair).model, threads)
        finally:
            unpublish()
    return floors


def spread(values: list[float], scale: float, digits: int) -> str:
    """The median of `values` (times `scale`), and their min-max when there are several."""
    median = statistics.median(values) * scale
    if len(values) == 1:
        return f"{median:,.{digits}f}"
    return f"{median:,.{digits}f} ({min(values) * scale:,.{digits}f}-{max(values) * scale:,.{digits}f})"


def table(results: list[Figures], engines: list[str], levels: list[int]) -> str:
    """The markdown table: a row per engine and level, medians over rounds (min-max)."""
    rows = [
        "| engine | concurrency | out tok/s | TTFT p50 (ms) | TTFT p90 (ms) | batch-1 decode tok/s |",
        "|---|---|---|---|---|---|",
    ]
    for engine in engines:
        for level in levels:
            cell = [r for r in results if r.engine == engine and r.concurrency == level]
            if not cell:
                continue
            decode = spread([r.decode_tok_s for r in cell], 1, 1) if level == 1 else ""
            rows.append(
                f"| {engine} | {level} | {spread([r.output_tok_s for r in cell], 1, 1)} "
                f"| {spread([r.ttft_p50_s for r in cell], 1000, 0)} "
                f"| {spread([r.ttft_p90_s for r in cell], 1000, 0)} | {decode} |"
            )
    return "\n".join(rows)


def plot(results: list[Figures], engines: list[str], levels: list[int], title: str, path: Path) -> None:
    """Output tok/s and TTFT p50 against concurrency, a line per engine (median, min-max band)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for engine in engines:
        for axes, metric, scale in ((left, "output_tok_s", 1.0), (right, "ttft_p50_s", 1000.0)):
            xs, mid, low, high = [], [], [], []
            for level in levels:
                values = [getattr(r, metric) * scale for r in results if r.engine == engine and r.concurrency == level]
                if values:
                    xs.append(level)
                    mid.append(statistics.median(values))
                    low.append(min(values))
                    high.append(max(values))
            line = axes.plot(xs, mid, marker="o", label=engine)[0]
            axes.fill_between(xs, low, high, color=line.get_color(), alpha=0.15)
    for axes in (left, right):
        axes.set_xscale("log", base=2)
        axes.set_xticks(levels, [str(level) for level in levels])
        axes.set_xlabel("concurrent requests")
        axes.grid(True, which="both", alpha=0.3)
    left.set(title="output throughput", ylabel="output tok/s")
    right.set_yscale("log")
    right.set(title="time to first token, p50", ylabel="ms")
    left.legend()
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def machine() -> str:
    """The CPU model, its core count and the SIMD flags that matter here, and the memory."""
    info = dict(
        line.split(":", 1)
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout.splitlines()
        if ":" in line
    )
    flags = set(info.get("Flags", "").split())
    wanted = ("avx", "avx2", "fma", "f16c", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni", "amx_bf16")
    simd = " ".join(f for f in wanted if f in flags) or "none of " + " ".join(wanted)
    memory = next(
        (
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal")
        ),
        0,
    )
    return (
        f"{info.get('Model name', '?').strip()}, {os.cpu_count()} CPUs "
        f"({info.get('Thread(s) per core', '?').strip()} thread(s) per core), "
        f"SIMD: {simd}, {memory / 2**20:.0f} GiB; load average at the start {os.getloadavg()[0]:.2f}"
    )


def versions(engines: list[Engine]) -> list[str]:
    """What ran: this repository's commit, and llama.cpp's and transformers' versions when used."""
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"], capture_output=True, text=True, check=False
    ).stdout.strip()
    lines = [f"ours: this repository at {commit or '?'}"]
    llama = next((e for e in engines if isinstance(e, LlamaEngine)), None)
    if llama is not None:
        lines.append(
            f"{llama.build.describe()}; `llama-server --version`: {llama_cpp_peer.server_version(llama.build.binary)}"
        )
    if any(isinstance(e, TransformersEngine) for e in engines):
        import torch
        import transformers

        lines.append(f"transformers {transformers.__version__}, torch {torch.__version__}")
    return lines


def parse_named(option: str, values: list[str]) -> dict[str, str]:
    """`--option NAME=VALUE` values as NAME -> VALUE."""
    named: dict[str, str] = {}
    for value in values:
        name, sep, rest = value.partition("=")
        if not sep or not name or not name.replace("_", "").replace("-", "").isalnum():
            raise SystemExit(
                f"bench_peer: {option} expects NAME=VALUE (NAME of letters, digits, - and _), got {value!r}"
            )
        named[name] = rest
    return named


def parse_ours(values: list[str]) -> dict[str, list[str]]:
    """`--ours NAME=FLAGS` values as engine name `ours-NAME` -> its flags (shell-split)."""
    return {f"ours-{name}": shlex.split(flags) for name, flags in parse_named("--ours", values).items()}


def parse_llama(values: list[str]) -> dict[str, Path]:
    """`--llama NAME=FILE` values as engine name `llama-NAME` -> the GGUF file."""
    named = {f"llama-{name}": Path(file) for name, file in parse_named("--llama", values).items()}
    for name, file in named.items():
        if name in LLAMA_FILES:
            raise SystemExit(
                f"bench_peer: {name} is the default model's {LLAMA_FILES[name]} file; give --llama another NAME"
            )
        if not file.is_file():
            raise SystemExit(f"bench_peer: {name}: no GGUF file at {file}")
    return named


def main() -> None:
    """Build what is missing, run the rounds and report."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--engines",
        nargs="+",
        help="engines to run, in this order (default: ours, each ours-NAME, llama-bf16, llama-q4_1, transformers)",
    )
    p.add_argument(
        "--ours",
        action="append",
        default=[],
        metavar="NAME=FLAGS",
        help=(
            "another configuration of our server, engine ours-NAME, e.g. 'q4=--model-path /path/file.gguf' (repeatable)"
        ),
    )
    p.add_argument(
        "--llama",
        action="append",
        default=[],
        metavar="NAME=FILE",
        help="llama-server on another GGUF file, engine llama-NAME (repeatable)",
    )
    p.add_argument(
        "--floor",
        action="append",
        default=[],
        metavar="NAME=MODEL",
        help="a model (directory or GGUF file) whose weight-read floor to measure, instead of the default model's",
    )
    p.add_argument(
        "--transformers-model", type=Path, help="the checkpoint transformers runs (default: the default model)"
    )
    p.add_argument(
        "--concurrency", type=int, nargs="+", default=[1, 4, 16, 32], help="concurrency levels (default 1 4 16 32)"
    )
    p.add_argument("--repeat", type=int, default=3, help="rounds; the table gives the median and min-max (default 3)")
    p.add_argument("--waves", type=int, default=2, help="requests per level = concurrency x waves (default 2)")
    p.add_argument("--prompt-len", type=int, default=256, help="prompt tokens of every request (default 256)")
    p.add_argument("--output-len", type=int, default=128, help="output tokens of every request (default 128)")
    p.add_argument("--warmup", type=int, default=4, help="warm-up requests after an engine starts (default 4)")
    p.add_argument(
        "--threads",
        type=int,
        help=(
            "threads of llama-server and transformers, and --cpu-threads of ours (default: the CPU count; ours keeps "
            "its default)"
        ),
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--markdown", type=Path, help="write the header and table here")
    p.add_argument("--plot", type=Path, help="write the PNG plot here")
    p.add_argument("--json", type=Path, help="write every round's figures here")
    args = p.parse_args()
    if min(args.concurrency) < 1 or min(args.repeat, args.waves, args.prompt_len, args.output_len, args.warmup) < 1:
        p.error("--concurrency, --repeat, --waves, --prompt-len, --output-len and --warmup must be at least 1")
    # A SIGTERM unwinds like ^C, so that every engine's `with` stops its server.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))

    ours = parse_ours(args.ours)
    llama = parse_llama(args.llama)
    floor_models = {name: Path(model) for name, model in parse_named("--floor", args.floor).items()}
    names = args.engines or ["ours", *ours, *LLAMA_FILES, *llama, "transformers"]
    settings = Settings(
        prompt_len=args.prompt_len,
        output_len=args.output_len,
        waves=args.waves,
        warmup=args.warmup,
        threads=args.threads or os.cpu_count() or 1,
        seed=args.seed,
    )
    levels = sorted(set(args.concurrency))
    engines = build_engines(
        names, ours, llama, settings, threads_given=args.threads is not None, transformers_model=args.transformers_model
    )

    command = "uv run python tools/bench_peer.py" + ("" if len(sys.argv) == 1 else " " + shlex.join(sys.argv[1:]))
    header = [
        f"command: `{command}`",
        f"date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
        f"machine: {machine()}",
        *versions(engines),
        f"workload: prompts of {settings.prompt_len} random token ids, {settings.output_len} output tokens (greedy, "
        f"ignore_eos), streamed /v1/completions; at concurrency C, C x {settings.waves} requests with C in flight; "
        f"{settings.threads} threads; {args.repeat} round(s): median (min-max)",
    ]
    print("\n".join(header), flush=True)
    if os.getloadavg()[0] > 0.5:  # every engine here uses all the cores: anything else running skews the figures
        print(
            f"bench_peer: warning: the load average is {os.getloadavg()[0]:.1f}; these figures need a quiet machine",
            flush=True,
        )
    started = time.monotonic()
    results = run_rounds(engines, levels, settings, args.repeat)
    elapsed = time.monotonic() - started
    floors = weight_read_floors(settings.threads, floor_models)
    floor_line = "weight-read floor at batch 1, measured after the rounds: " + ", ".join(
        f"{name} weights {rate:.1f} tok/s" for name, rate in floors.items()
    )
    repack_lines = [
        f"{e.name}: run with --no-repack, since llama-server crashed (SIGSEGV) loading {e.gguf.name} with its weight "
        "repacking on"
        for e in engines
        if isinstance(e, LlamaEngine) and e.no_repack
    ]
    report = "\n".join(
        [
            *(f"- {line}" for line in header),
            *(f"- {line}" for line in repack_lines),
            f"- took {elapsed / 60:.1f} min",
            f"- {floor_line}",
            "",
            table(results, names, levels),
            "",
        ]
    )
    print("\n" + report)
    if args.markdown:
        args.markdown.write_text(report, encoding="utf-8")
        print(f"markdown: {args.markdown}")
    if args.plot:
        title = (
            f"prompt {settings.prompt_len} / output {settings.output_len} tokens, {settings.threads} threads, "
            f"median of {args.repeat} round(s) (band: min-max); {machine().split(',')[0]}"
        )
        plot(results, names, levels, title, args.plot)
        print(f"plot: {args.plot}")
    if args.json:
        args.json.write_text(
            json.dumps({"header": header, "figures": [asdict(r) for r in results]}, indent=1) + "\n", encoding="utf-8"
        )
        print(f"json: {args.json}")


if __name__ == "__main__":
    main()
