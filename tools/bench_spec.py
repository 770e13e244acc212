"""Speculative decoding benchmark: the default model, greedy, with and without speculation, on a
copy-heavy workload (answers that repeat spans of the prompt) and an ordinary chat workload, at
batch 1 and batch 8, in one run; transformers' own prompt-lookup decoding at batch 1 as the peer.
Every request is greedy and ends at the model's end-of-turn token (or `--max-new-tokens`), as a
chat client's would: a copy-heavy answer is then mostly copy.

    uv run python tools/bench_spec.py                       # off, ngram, draft (self), draft (layer-skip)
    uv run python tools/bench_spec.py --settings off ngram --repeat 3

Each setting runs the jobs straight through serve's scheduler and runners in this process
(`build_scheduler`, as the server builds them; no HTTP), with the bags of `uv run serve` plus the
setting's spec leaves. Batch 1 runs the workload's prompts one after another; batch 8 submits
eight at once. Output tok/s is output tokens over wall time; with --repeat N the settings run N
times in turn (off, ngram, ..., off, ngram, ...) and each row keeps its best run, so a slow
minute of this shared machine does not land on one setting alone. Every setting's tokens are compared
with the "off" setting's: greedy output must be identical (the table says so per row). The draft
settings use the default model as its own draft (acceptance near 100%: the cost of the
machinery), and a layer-skip draft, the default model's first `--skip-draft-layers` layers with
its embeddings, final norm and head, written once into a temporary checkpoint.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CODE = """def moving_average(values, window):
    if window <= 0:
        raise ValueError("window must be positive")
    totals = []
    running = 0.0
    for index, value in enumerate(values):
        running += value
        if index >= window:
            running -= values[index - window]
        if index >= window - 1:
            totals.append(running / window)
    return totals
"""
PASSAGE = (
    "The lighthouse keeper climbed the spiral stairs every evening at dusk. He trimmed the wick, polished the great "
    "lens, and wrote the weather in a leather logbook: wind from the west, seas moderate, visibility good. Ships "
    "passed in the night and never knew his name, but they knew his light, and that was enough for him."
)
COPY_HEAVY = [
    f"Repeat the following Python function exactly, character for character:\n\n{CODE}",
    f"Rename the variable `running` to `total` in this function and print the whole function:\n\n{CODE}",
    f"Quote this passage back to me word for word:\n\n{PASSAGE}",
    f"Copy this text exactly, then stop:\n\n{PASSAGE}",
]
CHAT = [
    "What are three simple ways to sleep better?",
    "Explain why the sky is blue to a ten-year-old.",
    "Give me a short recipe for a vegetable soup.",
    "What should I pack for a weekend hiking trip?",
]
SETTINGS: dict[str, dict[str, Any]] = {
    "off": {},
    "ngram": {"speculative_algorithm": "ngram"},
    "draft-self": {"speculative_algorithm": "draft_model"},
    "draft-skip": {"speculative_algorithm": "draft_model"},
}


@dataclass(frozen=True)
class Row:
    """One (setting, workload, batch) measurement."""

    setting: str
    workload: str
    batch: int
    tokens: int
    wall_s: float
    accept_length: float
    acceptance_rate: float
    identical: bool | None

    @property
    def throughput(self) -> float:
        return self.tokens / self.wall_s


def chat_prompts(model_dir: Path, questions: list[str]) -> list[list[int]]:
    """Each question as the model's chat template renders a user turn, tokenized."""
    from transformers import AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(model_dir)
    texts = [
        tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False)
        for q in questions
    ]
    return [list(tokenizer.encode(text, add_special_tokens=False)) for text in texts]


def layer_skip_draft(model_dir: Path, layers: int, into: Path) -> Path:
    """The default model's first `layers` decoder layers as a checkpoint of its own."""
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(model_dir / "model.safetensors"))
    kept = {
        name: t
        for name, t in tensors.items()
        if not name.startswith("model.layers.") or int(name.split(".")[2]) < layers
    }
    into.mkdir(parents=True, exist_ok=True)
    save_file(kept, str(into / "model.safetensors"), metadata={"format": "pt"})
    config = json.loads((model_dir / "config.json").read_text())
    config["num_hidden_layers"] = layers
    (into / "config.json").write_text(json.dumps(config))
    for name in ("tokenizer.json", "tokenizer_config.json", "generation_config.json"):
        if (model_dir / name).is_file():
            shutil.copy(model_dir / name, into / name)
    return into


def run_setting(
    spec_leaves: dict[str, Any],
    workloads: dict[str, list[list[int]]],
    batches: list[int],
    max_new: int,
    eos: frozenset[int],
    setting: str,
) -> tuple[list[Row], dict[tuple[str, int], list[list[int]]]]:
    """Every workload at every batch size under one setting, on a freshly built scheduler."""
    import config_bags
    from config_bags.server import Bags, SpecBag
    from runtime_scheduler import Request, SamplingParams, StopConditions
    from serve.metrics.speculative import accept_length_of, acceptance_rate_of
    from serve.record import ServerArgs, resolve
    from serve.scheduler_process.process import build_scheduler

    bags: Bags = resolve(ServerArgs(**spec_leaves)).bags()
    config_bags.unpublish()
    config_bags.publish(bags, role="standalone")
    scheduler, _ = build_scheduler()
    spec_on = config_bags.server.get_spec().speculative_algorithm is not None
    assert spec_on == (setting != "off") and isinstance(config_bags.server.get_spec(), SpecBag)

    def drain(prompts: list[list[int]], batch: int, tag: str) -> tuple[int, list[list[int]]]:
        outputs: dict[str, list[int]] = {}
        for start in range(0, len(prompts), batch):
            for index, prompt in enumerate(prompts[start : start + batch], start):
                rid = f"{tag}{index}"
                outputs[rid] = []
                scheduler.add_request(
                    Request(
                        rid=rid,
                        prompt_ids=tuple(prompt),
                        sampling=SamplingParams(),
                        stop=StopConditions(max_new_tokens=max_new, eos_token_ids=eos),
                    )
                )
            while scheduler.has_work():
                for event in scheduler.step():
                    if event.token_id is not None:
                        outputs[event.rid].append(event.token_id)
        ordered = [outputs[f"{tag}{i}"] for i in range(len(prompts))]
        return sum(len(o) for o in ordered), ordered

    drain(workloads["chat"][:2], 2, "warm")
    rows: list[Row] = []
    produced: dict[tuple[str, int], list[list[int]]] = {}
    for name, prompts in workloads.items():
        for batch in batches:
            jobs = prompts * (batch // len(prompts)) if batch > len(prompts) else prompts
            before = scheduler.metrics()
            started = time.perf_counter()
            tokens, outputs = drain(jobs, batch, f"{name}{batch}-")
            wall = time.perf_counter() - started
            after = scheduler.metrics()
            delta = _spec_delta(before, after)
            rows.append(
                Row(
                    setting,
                    name,
                    batch,
                    tokens,
                    wall,
                    accept_length_of(delta) if spec_on else 1.0,
                    acceptance_rate_of(delta) if spec_on else 0.0,
                    None,
                )
            )
            produced[(name, batch)] = outputs
    config_bags.unpublish()
    return rows, produced


def _spec_delta(before: Any, after: Any) -> Any:
    """The scheduler's speculative totals over one measurement."""
    import msgspec

    counts = list(after.spec_accept_length_counts)
    for n, c in enumerate(before.spec_accept_length_counts):
        counts[n] -= c
    return msgspec.structs.replace(
        after,
        spec_draft_tokens=after.spec_draft_tokens - before.spec_draft_tokens,
        spec_accepted_tokens=after.spec_accepted_tokens - before.spec_accepted_tokens,
        spec_accept_length_counts=tuple(counts),
    )


def transformers_peer(
    model_dir: Path, workloads: dict[str, list[list[int]]], max_new: int, lookup: int, lengths: dict[str, list[int]]
) -> list[Row]:
    """transformers `generate`, greedy, batch 1, with and without its prompt-lookup decoding, each
    request run to the length this server's answer had (`lengths`), so both do the same work."""
    import torch
    from transformers import AutoModelForCausalLM

    model: Any = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
    model.eval()
    rows = []
    for label, extra in (("transformers", {}), ("transformers prompt-lookup", {"prompt_lookup_num_tokens": lookup})):
        for name, prompts in workloads.items():
            tokens, wall = 0, 0.0
            for prompt, length in zip(prompts, lengths[name], strict=True):
                ids = torch.tensor([prompt])
                started = time.perf_counter()
                with torch.inference_mode():
                    out = model.generate(
                        ids,
                        attention_mask=torch.ones_like(ids),
                        max_new_tokens=length,
                        min_new_tokens=length,
                        do_sample=False,
                        **extra,
                    )
                wall += time.perf_counter() - started
                tokens += out.shape[1] - len(prompt)
            rows.append(Row(label, name, 1, tokens, wall, 0.0, 0.0, None))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--settings", nargs="+", default=list(SETTINGS), choices=list(SETTINGS))
    parser.add_argument("--batches", nargs="+", type=int, default=[1, 8])
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument(
        "--repeat", type=int, default=1, help="run the settings this many times in turn; keep each row's best"
    )
    parser.add_argument("--skip-draft-layers", type=int, default=10, help="layers of the layer-skip draft")
    parser.add_argument("--no-peer", action="store_true", help="skip transformers")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args()

    import torch

    from runtime_runner import ensure_default_model

    torch.set_num_threads(torch.get_num_threads())
    from runtime_runner.loading.arch_config import read_arch_config

    model_dir = ensure_default_model()
    eos = frozenset(read_arch_config(model_dir).eos_token_ids)
    workloads = {"copy-heavy": chat_prompts(model_dir, COPY_HEAVY), "chat": chat_prompts(model_dir, CHAT)}
    scratch = Path(tempfile.mkdtemp(prefix="bench-spec-"))
    rows: list[Row] = []
    reference: dict[tuple[str, int], list[list[int]]] = {}
    try:
        for setting in [s for _ in range(args.repeat) for s in args.settings]:
            leaves = dict(SETTINGS[setting])
            if setting == "draft-self":
                leaves["speculative_draft_model_path"] = str(model_dir)
            if setting == "draft-skip":
                leaves["speculative_draft_model_path"] = str(
                    layer_skip_draft(model_dir, args.skip_draft_layers, scratch / "skip")
                )
            got, produced = run_setting(leaves, workloads, args.batches, args.max_new_tokens, eos, setting)
            if setting == "off":
                reference = produced
            for row in got:
                same = (
                    None
                    if not reference
                    else reference[(row.workload, row.batch)] == produced[(row.workload, row.batch)]
                )
                earlier = next(
                    (r for r in rows if (r.setting, r.workload, r.batch) == (row.setting, row.workload, row.batch)),
                    None,
                )
                if earlier is None or earlier.throughput < row.throughput:
                    rows = [r for r in rows if r is not earlier] + [Row(**{**row.__dict__, "identical": same})]
                elif same is False:
                    rows = [r if r is not earlier else Row(**{**r.__dict__, "identical": False}) for r in rows]
            print(f"done: {setting}", flush=True)
        if not args.no_peer:
            lengths = (
                {name: [len(o) for o in reference[(name, 1)]] for name in workloads}
                if reference
                else {name: [args.max_new_tokens] * len(prompts) for name, prompts in workloads.items()}
            )
            rows += transformers_peer(model_dir, workloads, args.max_new_tokens, 3, lengths)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    base = {(r.workload, r.batch): r.throughput for r in rows if r.setting == "off"}
    print(
        f"\n{'setting':28} {'workload':11} {'batch':>5} {'tok/s':>8} {'vs off':>7} {'accept len':>10} "
        f"{'accept rate':>11} identical"
    )
    for r in rows:
        ratio = r.throughput / base[(r.workload, r.batch)] if (r.workload, r.batch) in base else float("nan")
        print(
            f"{r.setting:28} {r.workload:11} {r.batch:5d} {r.throughput:8.1f} {ratio:6.2f}x {r.accept_length:10.2f} "
            f"{r.acceptance_rate:11.2f} {'' if r.identical is None else r.identical}"
        )
    if args.json is not None:
        args.json.write_text(json.dumps([{**r.__dict__, "throughput": r.throughput} for r in rows], indent=1))


if __name__ == "__main__":
    main()
