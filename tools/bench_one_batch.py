"""One-batch throughput of the runner against transformers, on the default model (SmolLM2-135M).

For each dtype and batch size, both engines get the same prompts (equal length, different text):
prefill is one forward over the whole batch; decode is a fixed number of new tokens per request
(no stop tokens). Decode time runs from the first generated token to the last in both engines,
so prefill is not counted as decode. Each measurement alternates the engines `--repeats` times
and keeps each engine's best.

    uv run python tools/bench_one_batch.py [--batch-sizes 1 8 32] [--dtypes bfloat16 float32] [--torch-compile]

With --torch-compile the runner runs its one-request decode step through torch.compile (the
compile happens while the runner is built, before anything is timed; deterministic inference is
then off). `--deterministic both` (the default) measures the runner under each setting of
exec.kernel.enable_deterministic_inference in the same run, alternating with transformers: the
batch-invariant kernels (InvariantLinear, cpu_paged for both halves) and the fast path
(oneDNN/aten matmuls, SDPA prompts).
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from weight_read_floor import weight_read_floor

from attn_backends import build_attention_pair
from config_bags import publish, unpublish
from config_bags.server import Bags, DeviceBag, ExecBag, GraphBag, KernelBag, MemoryBag, ModelBag, ScheduleBag
from runtime_runner.loading.default_model import ensure_default_model
from runtime_runner.runner import ModelRunner
from runtime_runner.standalone import StandaloneDriver

TEXT = (
    "The history of computing is a story of ideas that turned into machines and machines that changed ideas. "
    "Early mechanical calculators gave way to programmable electronic computers, and those in turn to the "
    "personal devices that fill our pockets. Each step made computation cheaper and more widely available. "
)


@dataclass(frozen=True)
class Rates:
    """Tokens per second of one engine at one batch size."""

    prefill: float
    decode: float


def prompts_of(tokenizer: object, batch: int, length: int) -> list[list[int]]:
    """`batch` prompts of exactly `length` tokens, each a different window of the text."""
    ids: list[int] = tokenizer(TEXT * 8)["input_ids"]  # type: ignore[operator]
    return [ids[i * 3 : i * 3 + length] for i in range(batch)]


def timed(fn: Callable[[], object]) -> float:
    """Seconds one call takes."""
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def runner_rates(runner: ModelRunner, prompts: list[list[int]], new_tokens: int) -> Rates:
    """Prefill the whole batch in one step, then decode `new_tokens` steps."""
    driver = StandaloneDriver(runner)
    seqs = [driver.add(p) for p in prompts]
    prefill = timed(driver.step)
    decode = timed(lambda: [driver.step() for _ in range(new_tokens)])
    for seq in seqs:
        driver.finish(seq)
    tokens = sum(len(p) for p in prompts)
    return Rates(prefill=tokens / prefill, decode=len(prompts) * new_tokens / decode)


def transformers_rates(model: object, prompts: list[list[int]], new_tokens: int) -> Rates:
    """The same batch through transformers: one forward for prefill; for decode, `generate` with a
    fixed token count, timed from its first generated token to its last by a stopping criterion
    that only records when it is called (once per step)."""
    from transformers import StoppingCriteria, StoppingCriteriaList

    class Stamps(StoppingCriteria):
        def __init__(self) -> None:
            self.times: list[float] = []

        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: object) -> torch.Tensor:
            self.times.append(time.perf_counter())
            return torch.zeros(input_ids.shape[0], dtype=torch.bool)

    ids = torch.tensor(prompts)
    mask = torch.ones_like(ids)
    stamps = Stamps()
    with torch.inference_mode():
        prefill = timed(lambda: model(ids, attention_mask=mask))  # type: ignore[operator]
        model.generate(
            ids,
            attention_mask=mask,
            max_new_tokens=new_tokens + 1,
            min_new_tokens=new_tokens + 1,  # type: ignore[attr-defined]
            do_sample=False,
            pad_token_id=0,
            stopping_criteria=StoppingCriteriaList([stamps]),
        )
    decode = stamps.times[-1] - stamps.times[0]
    return Rates(prefill=ids.numel() / prefill, decode=len(prompts) * (len(stamps.times) - 1) / decode)


def best(rates: list[Rates]) -> Rates:
    """The fastest of repeated runs (on a shared machine, slower runs measure the neighbours)."""
    return Rates(prefill=max(r.prefill for r in rates), decode=max(r.decode for r in rates))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--dtypes", nargs="+", default=["bfloat16", "float32"], choices=["bfloat16", "float32"])
    parser.add_argument("--prompt-len", type=int, default=64)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per engine, alternating; the best is reported")
    parser.add_argument(
        "--torch-compile",
        action="store_true",
        help="run the runner with exec.graph.enable_torch_compile "
        "(its one-request decode step compiled; compiling is not timed)",
    )
    parser.add_argument(
        "--deterministic",
        choices=["on", "off", "both"],
        default="both",
        help="exec.kernel.enable_deterministic_inference of the runner (both: one runner each, same run)",
    )
    args = parser.parse_args()
    if args.torch_compile and args.deterministic != "off":
        parser.error(
            "--torch-compile compiles the decode step, which deterministic inference refuses; add --deterministic off"
        )
    settings = {"on": [True], "off": [False], "both": [True, False]}[args.deterministic]
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir: Path = ensure_default_model()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(
        f"model {model_dir.name}, prompt {args.prompt_len} tokens, {args.new_tokens} new tokens, "
        f"{torch.get_num_threads()} threads"
    )
    print(
        "| dtype | batch | deterministic | prefill tok/s (runner / transformers = ratio) "
        "| decode tok/s (runner / transformers = ratio) |"
    )
    print("|---|---|---|---|---|")
    rates: dict[tuple[str, int, bool], tuple[Rates, Rates]] = {}
    floors: dict[str, float] = {}
    for dtype in args.dtypes:
        pool = max(args.batch_sizes) * (args.prompt_len + args.new_tokens + 16) * 2
        runners: dict[bool, ModelRunner] = {}
        for deterministic in settings:
            unpublish()
            # The driver runs whole batches itself; the scheduler's budgets only have to fit the pool.
            publish(
                Bags(
                    model=ModelBag(model_path=str(model_dir), dtype=dtype),
                    schedule=ScheduleBag(page_size=16, chunked_prefill_size=-1, max_prefill_tokens=pool),
                    memory=MemoryBag(max_total_tokens=pool),
                    device=DeviceBag(device="cpu", cpu_threads=args.threads),
                    exec=ExecBag(
                        kernel=KernelBag(enable_deterministic_inference=deterministic),
                        graph=GraphBag(enable_torch_compile=args.torch_compile),
                    ),
                ),
                role="standalone",
            )
            built = time.perf_counter()
            runners[deterministic] = ModelRunner(build_attention_pair)
            print(
                f"{dtype}: runner (deterministic {'on' if deterministic else 'off'}) built in "
                f"{time.perf_counter() - built:.1f} s (torch.compile {'on' if args.torch_compile else 'off'}, "
                f"attention {runners[deterministic].attention_stamp})",
                flush=True,
            )
        reference = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, dtype)).eval()  # type: ignore[no-untyped-call]
        warm = prompts_of(tokenizer, 2, 16)
        for runner in runners.values():
            runner_rates(runner, warm, 2)
        transformers_rates(reference, warm, 2)
        for batch in args.batch_sizes:
            prompts = prompts_of(tokenizer, batch, args.prompt_len)
            ours_runs: dict[bool, list[Rates]] = {d: [] for d in runners}
            theirs_runs = []
            for _ in range(args.repeats):
                for deterministic, runner in runners.items():
                    ours_runs[deterministic].append(runner_rates(runner, prompts, args.new_tokens))
                theirs_runs.append(transformers_rates(reference, prompts, args.new_tokens))
            theirs = best(theirs_runs)
            for deterministic, runs in ours_runs.items():
                ours = best(runs)
                rates[(dtype, batch, deterministic)] = (ours, theirs)
                print(
                    f"| {dtype} | {batch} | {'on' if deterministic else 'off'} "
                    f"| {ours.prefill:.0f} / {theirs.prefill:.0f} = {ours.prefill / theirs.prefill:.2f}x "
                    f"| {ours.decode:.1f} / {theirs.decode:.1f} = {ours.decode / theirs.decode:.2f}x |",
                    flush=True,
                )
        floors[dtype] = weight_read_floor(next(iter(runners.values())).model)
        del runners, reference
    unpublish()
    for dtype in args.dtypes:
        for deterministic in settings:
            setting = f"deterministic {'on' if deterministic else 'off'}"
            if (dtype, 1, deterministic) in rates and (dtype, 32, deterministic) in rates:
                one_hf, big = rates[(dtype, 1, deterministic)][1].decode, rates[(dtype, 32, deterministic)][0].decode
                print(
                    f"{dtype}, {setting}: runner batch-32 decode {big:.1f} tok/s = {big / one_hf:.1f}x transformers' "
                    f"batch-1 rate ({one_hf:.1f} tok/s)"
                )
            if (dtype, 1, deterministic) in rates:
                ours_one, theirs_one = (
                    rates[(dtype, 1, deterministic)][0].decode,
                    rates[(dtype, 1, deterministic)][1].decode,
                )
                print(
                    f"{dtype}, {setting}: batch-1 weight-read floor {floors[dtype]:.1f} tok/s; runner at "
                    f"{ours_one / floors[dtype]:.0%} of it, transformers at {theirs_one / floors[dtype]:.0%}"
                )
        if len(settings) == 2:
            for batch in args.batch_sizes:
                on, off = rates[(dtype, batch, True)][0], rates[(dtype, batch, False)][0]
                print(
                    f"{dtype}, batch {batch}: deterministic on / off = prefill {on.prefill / off.prefill:.2f}x, "
                    f"decode {on.decode / off.decode:.2f}x"
                )


if __name__ == "__main__":
    main()
