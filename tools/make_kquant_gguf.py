"""The default model (SmolLM2-135M-Instruct: its bf16 conversion in the model cache) written as a
GGUF file of llama-quantize's Q4_K_M per-tensor choices (serve_testing.llama_quantize_mix: its
576-wide rows take Q5_0 for Q4_K and Q8_0 for Q6_K, so q|k|v mixes Q5_0 with a Q8_0 v in the
layers given more bits, down projections of 1536 are Q4_K or Q6_K, the tied embedding Q8_0), packed
by the test fixtures' quantizer (serve_testing.gguf_quantizer, no search for the best scales), beside
its de-quantized reference (a float32 Hugging Face checkpoint of the very values the blocks stand for).

Then, unless --no-check, the runner serves both in float32 with deterministic inference (the native
step, as a server runs it): the prompts' last logits prefilled together and their greedy tokens
decoded together must be bitwise equal; it prints each step's margin between the two best logits
(how clear each greedy choice was) and the texts.

    uv run python tools/make_kquant_gguf.py OUT_DIR [--new-tokens 16] [--no-check]

Serve the file with the default model's tokenizer (the GGUF holds none):

    uv run serve --model OUT_DIR/model.gguf --tokenizer-path <the default model's directory> --dtype float32
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from config_bags.server.bags.exec import QuantizedActivations

PROMPTS = (
    "The capital of France is",
    "1, 2, 3, 4, 5,",
    "def add(a, b):\n    ",
    "Water boils at",
)


def write(out: Path) -> tuple[Path, Path, Path]:
    """The GGUF file and its reference in `out`; answers (file, reference, the default model's directory)."""
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="the folder to write model.gguf and reference/ into")
    parser.add_argument("--new-tokens", type=int, default=16)
    parser.add_argument("--no-check", action="store_true", help="write only")
    args = parser.parse_args()
    started = time.perf_counter()
    gguf_file, reference, tokenizer_dir = write(args.out)
    same = args.no_check or check(gguf_file, reference, tokenizer_dir, args.new_tokens)
    print(f"{time.perf_counter() - started:.1f} s in all")
    raise SystemExit(0 if same else 1)


if __name__ == "__main__":
    main()
