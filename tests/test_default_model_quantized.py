"""The default model served from its bundled GGUF file as it is (Q4_1 projections, a Q8_0 embedding
that is also the tied LM head), and its dense checkpoint quantized to int8 at load, each against the
de-quantized model: the GGUF's weights de-quantized to fp32 and written back under gguf-py's names
with the Q/K rows put back apart from the loader (serve_testing.gguf_reference), run by transformers
in fp32.

Tolerances, and why:
- the GGUF with float32 activations (`--quantized-activations float32`; dtype `auto` computes
  quantized weights in float32 on a CPU): max |logit difference| <= 1e-3 at the last prompt token.
  The quantized kernel computes the fp32 linear of the de-quantized matrix exactly, so only the
  summation order of transformers' fp32 matmuls and attention differs (measured at most 1e-4; logits
  reach about 35). Greedy text equals the reference's on every prompt whose reference top-two margin
  stays above twice the tolerance at every step, which the test asserts before comparing (the README
  question's first token has a margin of 0.08, so a bfloat16 forward, which rounds the logits to
  steps of 0.125 there, may answer it otherwise: the reason quantized weights compute in float32);
- the GGUF as served by default (int8 activations, rows rounded per 32 values as llama.cpp does):
  the largest logit difference per prompt <= 6% of the reference's logit range (measured 4.4% on
  these prompts, the same on every instruction tier: each computes the same bits; SmolLM2's few
  very large activations make its blocks of 32 round coarsely), and greedy text equal on the
  prompts whose reference margin stays above 1.0 at every step (the counting prompt's is 3.2; the
  README question's first token wins by 0.08, and int8 activations answer it otherwise, as
  llama-server does on the same file);
- int8 quantized from the fp32 weights, as served (float32): max |logit difference| <= 3.0, the
  per-channel rounding noise of every matrix (embedding and tied head included): measured at most
  1.7 on these prompts and other chat prompts; the logits' standard deviation is 5-8 here.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from attn_backends import build_attention_pair
from config_bags import publish, unpublish
from config_bags.server import Bags, ExecBag, KernelBag, MemoryBag, ModelBag
from runtime_runner.loading.default_model import bundled_gguf
from runtime_runner.loading.gguf.tokenizer_cache import ensure_gguf_tokenizer
from runtime_runner.runner import ModelRunner
from runtime_runner.standalone import StandaloneDriver
from serve_testing.gguf_reference import write_dequantized_checkpoint

pytestmark = pytest.mark.timeout(600)

TEXTS = ("1, 2, 3, 4, 5,", "The capital of France is")
CHAT_QUESTIONS = ("What is the capital of France?", "Name the largest planet.")
NEW_TOKENS = 8
GGUF_TOLERANCE = 1e-3
INT8_TOLERANCE = 3.0
POOL = MemoryBag(max_total_tokens=16384)  # the default prefill budget fits it
FLOAT32_ACTIVATIONS = ExecBag(kernel=KernelBag(quantized_activations="float32"))
INT8_ACTIVATIONS_SHARE = 0.06
CLEAR_MARGIN = 1.0


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The de-quantized checkpoint, the prompts' token ids, and transformers' fp32 last logits, greedy
    tokens and per-step top-two margins over them."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = write_dequantized_checkpoint(bundled_gguf(), tmp_path_factory.mktemp("dequantized"))
    tokenizer: Any = AutoTokenizer.from_pretrained(ensure_gguf_tokenizer(bundled_gguf()))
    chats = [
        tokenizer.apply_chat_template([{"role": "user", "content": q}], tokenize=False, add_generation_prompt=True)
        for q in CHAT_QUESTIONS
    ]
    prompts = [tokenizer(text).input_ids for text in (*TEXTS, *chats)]
    model: Any = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    with torch.inference_mode():
        logits = torch.stack([model(torch.tensor([ids])).logits[0, -1] for ids in prompts])
        greedy, margins = [], []
        for ids in prompts:
            out = model.generate(
                torch.tensor([ids]),
                attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=NEW_TOKENS,
                do_sample=False,
                output_scores=True,
                return_dict_in_generate=True,
                eos_token_id=None,
                pad_token_id=0,
            )
            greedy.append(out.sequences[0, len(ids) :].tolist())
            margins.append(min(float(top[0] - top[1]) for top in (s[0].topk(2).values for s in out.scores)))
    return {"dir": folder, "prompts": prompts, "logits": logits, "greedy": greedy, "margins": margins}


@pytest.fixture
def runner_on() -> Iterator[Any]:
    """`build(model_path, **model leaves)`: a runner as serve would build it (dtype auto)."""

    def build(model_path: Path, exec: ExecBag | None = None, **model: Any) -> ModelRunner:
        unpublish()
        publish(
            Bags(model=ModelBag(model_path=str(model_path), **model), memory=POOL, exec=exec or ExecBag()),
            role="standalone",
        )
        return ModelRunner(build_attention_pair)

    yield build
    unpublish()


def _last_logits(runner: ModelRunner, prompts: list[list[int]]) -> torch.Tensor:
    return StandaloneDriver(runner).prefill_logits(prompts).float()


def test_the_bundled_gguf_with_float32_activations_is_within_tolerance_of_its_dequantized_model(
    reference: dict[str, Any], runner_on: Any
) -> None:
    """Reverse-verified: with the Q/K rows left interleaved (llama out of loading.gguf.arch.PERMUTED_QK)
    the logits differed by up to 26 (the reference puts the rows back apart from the loader)."""
    runner = runner_on(bundled_gguf(), exec=FLOAT32_ACTIVATIONS)
    assert runner.model.dtype == torch.float32
    prompts = reference["prompts"]
    difference = (_last_logits(runner, prompts) - reference["logits"]).abs().amax(dim=-1)
    assert float(difference.max()) <= GGUF_TOLERANCE, difference
    assert min(reference["margins"]) > 2 * GGUF_TOLERANCE, (
        f"reference margins {reference['margins']}: pick clearer prompts"
    )
    assert StandaloneDriver(runner).generate(prompts, NEW_TOKENS) == reference["greedy"]


def test_the_bundled_gguf_as_served_reads_int8_activations_near_its_dequantized_model(
    reference: dict[str, Any], runner_on: Any
) -> None:
    """By default a GGUF file's matrices read int8 activations (llama.cpp's arithmetic): every
    prompt's last logits within INT8_ACTIVATIONS_SHARE of the reference's logit range, and the
    greedy tokens equal the reference's on every prompt whose top-two margin stays above
    CLEAR_MARGIN at every step (at least one here: the counting prompt). Reverse-verified: with
    the runner reading float32 activations whatever the leaf, the kind check failed."""
    runner = runner_on(bundled_gguf())
    assert runner.model.projections[0].o.activations == "int8"
    prompts = reference["prompts"]
    logits = _last_logits(runner, prompts)
    spread = (reference["logits"].amax(dim=-1) - reference["logits"].amin(dim=-1)).double()
    share = ((logits - reference["logits"]).abs().amax(dim=-1).double() / spread).max()
    assert float(share) <= INT8_ACTIVATIONS_SHARE, share
    clear = [i for i, margin in enumerate(reference["margins"]) if margin > CLEAR_MARGIN]
    assert clear, f"reference margins {reference['margins']}: no prompt has a clear margin"
    greedy = StandaloneDriver(runner).generate([prompts[i] for i in clear], NEW_TOKENS)
    assert greedy == [reference["greedy"][i] for i in clear]


def test_int8_of_the_default_model_is_within_tolerance_of_it(reference: dict[str, Any], runner_on: Any) -> None:
    """Reverse-verified: with Int8Weights quantizing each matrix with one scale (1/127 of its
    largest value) rather than one per row, the logits differed by up to 6.8 and this failed."""
    runner = runner_on(reference["dir"], quantization="int8")
    difference = (_last_logits(runner, reference["prompts"]) - reference["logits"]).abs().amax(dim=-1)
    assert float(difference.max()) <= INT8_TOLERANCE, difference
