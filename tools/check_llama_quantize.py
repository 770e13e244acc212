"""Files written by llama.cpp's own `llama-quantize`, served as they are and checked against their
de-quantized reference.

For each model and kind, llama-quantize turns the model's bf16 GGUF into the kind's file (a type mix
for Q4_K_M and Q5_K_M: llama-quantize picks each tensor's type, and substitutes Q5_0/Q5_1/Q8_0/
IQ4_NL where a row is not a multiple of 256). transformers de-quantizes the same file through the
`gguf` package into a float32 Hugging Face checkpoint: the reference, independent of our loader and
kernels. The runner then serves both in float32 with deterministic inference (make_kquant_gguf's
check): the prompts' last logits and their greedy tokens must be bitwise equal.

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
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path
from typing import Any

import llama_cpp_peer  # run as a script, its sibling tools import by name
import make_bench_model
import torch
from make_kquant_gguf import PROMPTS, check, served

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


def check_int8(gguf_file: Path, reference: Path, new_tokens: int) -> bool:
    """Whether `gguf_file` under int8 activations gives the reference's greedy tokens on every
    clear-margin prompt (printing the logit difference and each prompt's agreement)."""
    from transformers import AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(reference)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=("default", "bench-1b"), default="default")
    parser.add_argument("--kinds", nargs="*", default=list(KINDS), help=f"llama-quantize kinds (default {KINDS})")
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--activations", choices=("float32", "int8"), default="float32")
    args = parser.parse_args()
    from runtime_runner.loading.gguf.file import GgufFile

    source = bf16_gguf_of(args.model)
    outcomes = {}
    for kind in args.kinds:
        started = time.perf_counter()
        gguf_file = llama_cpp_peer.ensure_quantized_gguf(source, kind)
        counts = ", ".join(f"{name} x{count}" for name, count in GgufFile(gguf_file).type_counts().items())
        print(f"\n== {kind}: {gguf_file.name} ({gguf_file.stat().st_size / 1e6:.0f} MB: {counts})", flush=True)
        reference = ensure_reference(gguf_file)
        if args.activations == "int8":
            outcomes[kind] = check_int8(gguf_file, reference, args.new_tokens)
        else:
            outcomes[kind] = check(gguf_file, reference, reference, args.new_tokens)
        print(f"{kind}: {time.perf_counter() - started:.0f} s", flush=True)
    verdict = ("agree", "DISAGREE") if args.activations == "int8" else ("equal", "DIFFERENT")
    print("\n" + ", ".join(f"{kind}: {verdict[0] if same else verdict[1]}" for kind, same in outcomes.items()))
    raise SystemExit(0 if all(outcomes.values()) else 1)


if __name__ == "__main__":
    main()
