"""Files written by llama.cpp's own `llama-quantize`, served as they are and checked against their
de-quantized reference.

For each model and kind, llama-quantize turns the model's bf16 GGUF into the kind's file (a type mix
for Q4_K_M and Q5_K_M: llama-quantize picks each tensor's type, and substitutes Q5_0/Q5_1/Q8_0/
IQ4_NL where a row is not a multiple of 256). transformers de-quantizes the same file through the
`gguf` package into a float32 Hugging Face checkpoint: the reference, independent of our loader and
kernels. The runner then serves both in float32 with deterministic inference (`check`
below): the prompts' last logits and their greedy tokens must be bitwise equal.

    uv run python tools/check_llama_quantize.py                          # the default model, 4 kinds
    uv run python tools/check_llama_quantize.py --model bench-1b --kinds Q4_K_M

With `--activations int8` the file is served by the integer kernels instead (exec.kernel.
quantized_activations = int8: rows quantized to int8 per 32 values), which cannot be bitwise the
reference; the tool reports the largest logit difference on the prompts (absolute, and as a share
of the reference's logit range) and, per prompt, whether the greedy tokens agree, with the smallest
top-two margin the reference had on the way. A prompt is of clear margin where that margin is more
than twice the largest logit difference; the check passes when every clear-margin prompt agrees.

    uv run python tools/check_llama_quantize.py --model bench-1b --kinds Q4_K_M --activations int8

Models: `default` (the bf16 GGUF of the default model's weights, tools/llama_cpp_peer.py) and
`bench-1b` (tools/make_bench_model.py). Files and references are cached beside the bf16 GGUF;
llama.cpp is built first when missing. Exit status 0 when every file agreed.

`--quantizer fixtures` checks the test kit's own file instead, with no llama.cpp: the default model
(its bf16 conversion in the model cache) written as llama-quantize's Q4_K_M per-tensor choices
(serve_testing.llama_quantize_mix: its 576-wide rows take Q5_0 for Q4_K and Q8_0 for Q6_K, so q|k|v
mixes Q5_0 with a Q8_0 v in the layers given more bits, down projections of 1536 are Q4_K or Q6_K,
the tied embedding Q8_0), packed by serve_testing.gguf_quantizer (no search for the best scales),
beside its de-quantized reference (a float32 checkpoint of the very values the blocks stand for),
into `--out`. Serve that file with the default model's tokenizer (the GGUF holds none):

    uv run python tools/check_llama_quantize.py --quantizer fixtures --out /tmp/kquant
    uv run serve --model /tmp/kquant/model.gguf --tokenizer-path <the default model's directory> --dtype float32
"""

from __future__ import annotations

import argparse
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import llama_cpp_peer  # run as a script, its sibling tools import by name
import make_bench_model
import torch

from config_bags.server.bags.exec import QuantizedActivations

PROMPTS = (
    "The capital of France is",
    "1, 2, 3, 4, 5,",
    "def add(a, b):\n    ",
    "Water boils at",
)


KINDS = ("Q4_K_M", "Q5_K_M", "Q6_K", "Q8_0")


def bf16_gguf_of(model: str) -> Path:
    """The bf16 GGUF llama-quantize starts from, for `model`."""
    if model == "default":
        from runtime_runner.loading.default_model import bundled_gguf

        return llama_cpp_peer.ensure_bf16_gguf(bundled_gguf())
    return make_bench_model.ensure_bench_files(())["bf16"]


def ensure_reference(gguf_file: Path) -> Path:
    """The float32 checkpoint transformers de-quantizes `gguf_file` into (with the file's tokenizer),
    cached beside it."""
    from runtime_runner.loading.default_model import convert_gguf, move_into_place

    def converted(folder: Path) -> bool:
        return (folder / "model.safetensors").is_file() or (folder / "model.safetensors.index.json").is_file()

    target = gguf_file.with_name(gguf_file.name.removesuffix(".gguf") + ".reference")
    if converted(target):
        return target
    scratch = target.with_name(f".{target.name}.partial")
    shutil.rmtree(scratch, ignore_errors=True)
    convert_gguf(gguf_file, scratch, dtype=torch.float32)
    move_into_place(scratch, target, complete=converted)
    return target


def write_fixtures_file(out: Path) -> tuple[Path, Path, Path]:
    """The test kit's Q4_K_M-mix file of the default model and its reference in `out`; answers (file,
    reference, the default model's directory, whose tokenizer serves both)."""
    from transformers import AutoModelForCausalLM

    from runtime_runner.loading.default_model import ensure_default_model
    from runtime_runner.loading.gguf.file import GgufFile
    from serve_testing.llama_quantize_mix import q4_k_m_types
    from serve_testing.tiny_gguf import write_tiny_gguf

    source = ensure_default_model()
    started = time.perf_counter()
    model: Any = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    loaded = time.perf_counter()
    gguf_file, reference = write_tiny_gguf(model, out, "Q4_K", types=q4_k_m_types(model))
    written = time.perf_counter()
    counts = ", ".join(f"{kind} x{count}" for kind, count in GgufFile(gguf_file).type_counts().items())
    print(f"read {source} in {loaded - started:.1f} s")
    print(
        f"wrote {gguf_file} ({gguf_file.stat().st_size / 1e6:.0f} MB: {counts}) and {reference} "
        f"in {written - loaded:.1f} s"
    )
    return gguf_file, reference, source


def served(
    model: Path, prompts: Sequence[Sequence[int]], new_tokens: int, activations: QuantizedActivations = "float32"
) -> tuple[torch.Tensor, list[list[int]], list[list[float]]]:
    """`model` served by a standalone runner (float32, deterministic, its quantized matrices reading
    their rows as `activations`): the prompts' last logits prefilled together, their greedy tokens
    decoded together, and each step's top-two margin."""
    from attn_backends import build_attention_pair
    from config_bags import publish, unpublish
    from config_bags.server import Bags, ExecBag, KernelBag, MemoryBag, ModelBag
    from runtime_runner.runner import ModelRunner
    from runtime_runner.standalone import StandaloneDriver

    unpublish()
    publish(
        Bags(
            model=ModelBag(model_path=str(model), dtype="float32"),
            memory=MemoryBag(max_total_tokens=16384),
            exec=ExecBag(kernel=KernelBag(quantized_activations=activations)),
        ),
        role="standalone",
    )
    runner = ModelRunner(build_attention_pair)
    assert runner.native_step is not None, f"{model}: the runner declined the native step"
    driver = StandaloneDriver(runner)
    logits = driver.prefill_logits(prompts)
    seqs = [driver.add(p) for p in prompts]
    margins: list[list[float]] = [[] for _ in prompts]
    while any(len(seq.output) < new_tokens for seq in seqs):
        step = driver.step()
        for i, row in enumerate(step.logits):
            top = torch.topk(row.float(), 2).values
            margins[i].append(float(top[0] - top[1]))
        for seq in seqs:
            if seq in driver.active and len(seq.output) >= new_tokens:
                driver.finish(seq)
    return logits, [list(seq.output) for seq in seqs], margins


def check(gguf_file: Path, reference: Path, tokenizer_dir: Path, new_tokens: int) -> bool:
    """Whether the file serves its reference's logits and greedy tokens bitwise (printing both's figures)."""
    from transformers import AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(tokenizer_dir)
    prompts = [tokenizer.encode(text) for text in PROMPTS]
    outcomes = {}
    for name, model in (("gguf", gguf_file), ("reference", reference)):
        started = time.perf_counter()
        outcomes[name] = served(model, prompts, new_tokens)
        print(f"served the {name} in {time.perf_counter() - started:.1f} s (load, prefill, {new_tokens} greedy tokens)")
    (logits, tokens, margins), (want_logits, want_tokens, _) = outcomes["gguf"], outcomes["reference"]
    same = torch.equal(logits, want_logits) and tokens == want_tokens
    for text, ids, gaps in zip(PROMPTS, tokens, margins, strict=True):
        print(f"{text!r} -> {tokenizer.decode(ids)!r} (smallest top-2 margin {min(gaps):.3f})")
    print(f"logits and greedy tokens bitwise equal to the reference: {'yes' if same else 'NO'}")
    return same


def check_int8(gguf_file: Path, reference: Path, tokenizer_dir: Path, new_tokens: int) -> bool:
    """Whether `gguf_file` under int8 activations gives the reference's greedy tokens on every
    clear-margin prompt (printing the logit difference and each prompt's agreement)."""
    from transformers import AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(tokenizer_dir)
    prompts = [tokenizer.encode(text) for text in PROMPTS]
    logits, tokens, _ = served(gguf_file, prompts, new_tokens, "int8")
    want_logits, want_tokens, margins = served(reference, prompts, new_tokens)
    largest = float((logits - want_logits).abs().max())
    spread = float((want_logits.amax(-1) - want_logits.amin(-1)).min())
    print(f"largest |logit - reference| on the prompts: {largest:.4f} ({100 * largest / spread:.2f}% of the range)")
    agreed = True
    for text, ids, want, gaps in zip(PROMPTS, tokens, want_tokens, margins, strict=True):
        clear = min(gaps) > 2 * largest
        same = ids == want
        agreed &= same or not clear
        first = next((i for i, (a, b) in enumerate(zip(ids, want, strict=True)) if a != b), len(want))
        print(
            f"{text!r}: {'same' if same else f'differs from token {first}'} "
            f"(smallest reference margin {min(gaps):.3f}: {'clear' if clear else 'not clear'})"
        )
    return agreed


def checked(gguf_file: Path, reference: Path, tokenizer_dir: Path, args: argparse.Namespace) -> bool:
    """`gguf_file` against its reference under the activations `args` names."""
    if args.activations == "int8":
        return check_int8(gguf_file, reference, tokenizer_dir, args.new_tokens)
    return check(gguf_file, reference, tokenizer_dir, args.new_tokens)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=("default", "bench-1b"), default="default")
    parser.add_argument("--kinds", nargs="*", default=list(KINDS), help=f"llama-quantize kinds (default {KINDS})")
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--activations", choices=("float32", "int8"), default="float32")
    parser.add_argument(
        "--quantizer",
        choices=("llama-quantize", "fixtures"),
        default="llama-quantize",
        help="whose file: llama.cpp's, or the test kit's Q4_K_M mix of the default model (--model and --kinds unused)",
    )
    parser.add_argument(
        "--out", type=Path, help="with --quantizer fixtures: the folder to write model.gguf and reference/ into"
    )
    args = parser.parse_args()
    from runtime_runner.loading.gguf.file import GgufFile

    verdict = ("agree", "DISAGREE") if args.activations == "int8" else ("equal", "DIFFERENT")
    if args.quantizer == "fixtures":
        if args.out is None:
            parser.error("--quantizer fixtures writes its file into --out DIR")
        started = time.perf_counter()
        same = checked(*write_fixtures_file(args.out), args)
        print(f"\nfixtures Q4_K_M: {verdict[0] if same else verdict[1]} ({time.perf_counter() - started:.0f} s)")
        raise SystemExit(0 if same else 1)
    source = bf16_gguf_of(args.model)
    outcomes = {}
    for kind in args.kinds:
        started = time.perf_counter()
        gguf_file = llama_cpp_peer.ensure_quantized_gguf(source, kind)
        counts = ", ".join(f"{name} x{count}" for name, count in GgufFile(gguf_file).type_counts().items())
        print(f"\n== {kind}: {gguf_file.name} ({gguf_file.stat().st_size / 1e6:.0f} MB: {counts})", flush=True)
        reference = ensure_reference(gguf_file)
        outcomes[kind] = checked(gguf_file, reference, reference, args)
        print(f"{kind}: {time.perf_counter() - started:.0f} s", flush=True)
    print("\n" + ", ".join(f"{kind}: {verdict[0] if same else verdict[1]}" for kind, same in outcomes.items()))
    raise SystemExit(0 if all(outcomes.values()) else 1)


if __name__ == "__main__":
    main()
