"""How far the runner's bf16 greedy output agrees with transformers', under each setting of
deterministic inference, on the default model (SmolLM2-135M-Instruct).

A bf16 greedy continuation flips wherever two candidates are closer than the rounding of the
matmuls that score them, so agreement depends on whose rounding is compared: transformers' bf16
run shares aten's matmul with the fast path (deterministic off), while the exact answer is the
fp32 one. For each prompt (8 texts, 4 chat turns) the tool prints how many of the first
`--new-tokens` greedy tokens equal the reference's before the first difference, for the runner
with deterministic inference on and off, each prompt alone and all of them in one batch.

    uv run python tools/bench_bf16_agreement.py --reference-dtype bfloat16
    uv run python tools/bench_bf16_agreement.py --reference-dtype float32
"""

from __future__ import annotations

import argparse
import os
from typing import Any

import torch

from attn_backends import build_attention_pair
from config_bags import publish, unpublish
from config_bags.server import Bags, ExecBag, KernelBag, MemoryBag, ModelBag, ScheduleBag
from runtime_runner.loading.default_model import ensure_default_model
from runtime_runner.runner import ModelRunner
from runtime_runner.standalone import StandaloneDriver

TEXTS = [
    "The capital of France is",
    "Once upon a time, in a small village,",
    "def fibonacci(n):",
    "Water boils at",
    "The three primary colors are",
    "List the planets of the solar system:",
    "In 1492,",
    "Photosynthesis is the process",
]
QUESTIONS = ["What is the capital of France?", "Name three colors.", "Write a haiku about rain.", "What is 2+2?"]


def agreeing_prefix(got: list[int], expected: list[int]) -> int:
    """Tokens equal before the first difference."""
    return next(
        (i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b), min(len(got), len(expected))
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reference-dtype", choices=["bfloat16", "float32"], default="bfloat16")
    parser.add_argument("--new-tokens", type=int, default=32)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = ensure_default_model()
    tokenizer: Any = AutoTokenizer.from_pretrained(model_dir)
    chats = [
        tokenizer.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=False)
        for q in QUESTIONS
    ]
    prompts = [tokenizer(t)["input_ids"] for t in TEXTS] + [
        tokenizer(c, add_special_tokens=False)["input_ids"] for c in chats
    ]
    reference: Any = AutoModelForCausalLM.from_pretrained(model_dir, dtype=getattr(torch, args.reference_dtype))
    reference.eval()
    expected = []
    with torch.inference_mode():
        for prompt in prompts:
            ids = torch.tensor([prompt])
            out = reference.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=args.new_tokens,
                do_sample=False,
                eos_token_id=None,
                pad_token_id=0,
            )
            expected.append(out[0, len(prompt) :].tolist())
    print(
        f"default model, runner in bf16 against transformers in {args.reference_dtype}, {args.new_tokens} greedy "
        f"tokens, {len(prompts)} prompts"
    )
    print(
        "| deterministic | prompts run | tokens agreeing before the first difference, per prompt | prompts agreeing "
        "throughout |"
    )
    print("|---|---|---|---|")
    for deterministic in (True, False):
        unpublish()
        publish(
            Bags(
                model=ModelBag(model_path=str(model_dir), dtype="bfloat16"),
                schedule=ScheduleBag(page_size=16, max_prefill_tokens=8192),
                memory=MemoryBag(max_total_tokens=8192),
                exec=ExecBag(kernel=KernelBag(enable_deterministic_inference=deterministic)),
            ),
            role="standalone",
        )
        runner = ModelRunner(build_attention_pair)
        for batched in (False, True):
            driver = StandaloneDriver(runner)
            got = (
                driver.generate(prompts, args.new_tokens)
                if batched
                else [driver.generate([p], args.new_tokens)[0] for p in prompts]
            )
            agreeing = [agreeing_prefix(g, e) for g, e in zip(got, expected, strict=True)]
            whole = sum(a == args.new_tokens for a in agreeing)
            print(
                f"| {'on' if deterministic else 'off'} | {'all in one batch' if batched else 'one at a time'} "
                f"| {' '.join(map(str, agreeing))} | {whole}/{len(prompts)} |",
                flush=True,
            )
    unpublish()


if __name__ == "__main__":
    main()
