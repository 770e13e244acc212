"""`model.quantization = int8`: a dense checkpoint's matrices (every projection, the LM head and the
token embedding) quantized at load, per output channel, and held only in the quantized kernel.

Tolerances, and why:
- against the runner on the int8 matrices de-quantized and saved as a checkpoint (fp32, both
  batch-invariant): equal bitwise, since the kernel computes the batch-invariant fp32 linear of
  the de-quantized matrix and a quantized embedding row is its de-quantized row;
- against the unquantized checkpoint (fp32): max |logit difference| <= 0.15 on these tiny models,
  about twice the measured 0.08 (per-channel rounding moves each weight by up to 1/254 of its
  row's largest, and the logits here reach about 2), with the same first greedy token wherever
  the unquantized top-two margin exceeds twice the tolerance;
- refusals, without serve: a runner refuses int8 where its kernels cannot run (serve refuses the
  same at launch, tests/test_e2e_gguf.py).
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from safetensors.torch import load_file, save_file

from attn_backends import LinearAttnBackendFactory, build_attention_pair
from config_bags import publish, unpublish
from config_bags.server import Bags, ExecBag, GraphBag, MemoryBag, ModelBag
from runtime_runner.errors import UnsupportedConfigError
from runtime_runner.kernels.quantized_embedding import QuantizedEmbedding
from runtime_runner.kernels.quantized_tensor import int8_per_channel_of
from runtime_runner.loading.weight_matrix import KernelOwned
from runtime_runner.runner import ModelRunner
from runtime_runner.standalone import StandaloneDriver
from serve_testing.tiny_hybrid_checkpoint import build_tiny_hybrid_checkpoint

TINY: dict[str, Any] = dict(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=512,
    initializer_range=0.1,
    bos_token_id=None,
    eos_token_id=None,
    pad_token_id=None,
)
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": ("LlamaForCausalLM", {"mlp_bias": True}),
    "qwen2-tied": ("Qwen2ForCausalLM", {"tie_word_embeddings": True}),
}
_DRAWN = torch.Generator().manual_seed(3)
PROMPTS = [torch.randint(0, TINY["vocab_size"], (n,), generator=_DRAWN).tolist() for n in (3, 5, 9, 14, 20, 26, 33, 40)]
NEW_TOKENS = 6
TOLERANCE = 0.15
POOL = MemoryBag(max_total_tokens=16384)  # the default prefill budget fits it
Outcome = tuple[torch.Tensor, list[list[int]]]


def _runner(model_dir: Path, **model: Any) -> ModelRunner:
    unpublish()
    publish(Bags(model=ModelBag(model_path=str(model_dir), dtype="float32", **model), memory=POOL), role="standalone")
    return ModelRunner(build_attention_pair)


def _outcome(runner: ModelRunner) -> Outcome:
    """The prompts' last logits, prefilled together, and their greedy tokens, decoded together."""
    driver = StandaloneDriver(runner)
    return driver.prefill_logits(PROMPTS), driver.generate(PROMPTS, NEW_TOKENS)


def _int8_reference(model_dir: Path, target: Path) -> Path:
    """`model_dir` with every matrix replaced by its int8 quantization, de-quantized (fp32)."""
    shutil.copytree(model_dir, target)
    tensors = load_file(model_dir / "model.safetensors")
    save_file(
        {name: int8_per_channel_of(t).dequantize() if t.dim() == 2 else t for name, t in tensors.items()},
        target / "model.safetensors",
        metadata={"format": "pt"},
    )
    return target


@pytest.fixture(scope="module")
def outcomes(
    tiny_checkpoint: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, Outcome]]:
    """Each case's outcome quantized to int8, on its de-quantized int8 reference, and unquantized."""
    found = {}
    for case, (architecture, overrides) in CASES.items():
        model_dir = tiny_checkpoint(architecture, **{**TINY, **overrides})
        reference = _int8_reference(model_dir, tmp_path_factory.mktemp(case) / "int8-dequantized")
        found[case] = {
            "int8": _outcome(_runner(model_dir, quantization="int8")),
            "reference": _outcome(_runner(reference)),
            "dense": _outcome(_runner(model_dir)),
        }
    unpublish()
    return found


@pytest.mark.parametrize("case", sorted(CASES))
def test_int8_serves_its_dequantized_matrices_bitwise(case: str, outcomes: dict[str, dict[str, Outcome]]) -> None:
    """Reverse-verified: with Int8Weights leaving the token embedding dense (tied: the head too),
    or with the int8 reader unused, both cases differed from their reference."""
    assert torch.equal(outcomes[case]["int8"][0], outcomes[case]["reference"][0])
    assert outcomes[case]["int8"][1] == outcomes[case]["reference"][1]


@pytest.mark.parametrize("case", sorted(CASES))
def test_int8_stays_within_its_tolerance_of_the_unquantized_model(
    case: str, outcomes: dict[str, dict[str, Outcome]]
) -> None:
    """Reverse-verified: with Int8Weights rounding to 4 bits (scale 1/7 of each row's largest) the
    logits differed by up to 1.1 and both cases failed; one scale per matrix rather than per row
    stays within it on these near-uniform random weights (the default model's test catches that)."""
    quantized, dense = outcomes[case]["int8"], outcomes[case]["dense"]
    assert float((quantized[0] - dense[0]).abs().max()) <= TOLERANCE
    margins = dense[0].topk(2).values
    clear = [i for i in range(len(PROMPTS)) if float(margins[i, 0] - margins[i, 1]) > 2 * TOLERANCE]
    assert clear, "no prompt has a clear top-1 margin: pick others"
    assert [quantized[1][i][0] for i in clear] == [dense[1][i][0] for i in clear]


def test_int8_holds_each_matrix_once_in_its_kernel(tiny_checkpoint: Callable[..., Path], unpublished: None) -> None:
    """Reverse-verified: with the decoder keeping its loaded weights (no `released()`), they held
    QuantizedTensors next to the kernels' panels."""
    runner = _runner(tiny_checkpoint("Qwen2ForCausalLM", **{**TINY, "tie_word_embeddings": True}), quantization="int8")
    weights = runner.model.weights
    held = [
        weights.embed,
        weights.lm_head,
        *(m for layer in weights.layers for m in (layer.qkv, layer.o_proj, layer.gate_up, layer.down)),
    ]
    assert all(isinstance(matrix, KernelOwned) and matrix.kind == "int8" for matrix in held)
    embedding = runner.model._embedding
    assert isinstance(embedding, QuantizedEmbedding) and embedding.table is runner.model.head_projection


REFUSALS: dict[str, tuple[dict[str, Any], str]] = {
    "float16": (
        {"dtype": "float16"},
        "the quantized kernels compute in float32 or bfloat16, and dtype = 'float16' computes in float16",
    ),
    "compiled": ({"compiled": True}, "quantization = 'int8': enable_torch_compile compiles the dense decode step"),
    "hybrid": (
        {"hybrid": True},
        "Qwen3NextForCausalLM is not served with quantized weights; accepted: LlamaForCausalLM, "
        "Qwen2ForCausalLM, Qwen3ForCausalLM",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSALS))
def test_a_runner_refuses_int8_where_its_kernels_cannot_run(
    case: str, tiny_checkpoint: Callable[..., Path], tmp_path: Path, unpublished: None
) -> None:
    """The refusals a runner built without serve makes itself (serve's rule states the same).

    Reverse-verified: with load_target not asking quantized_weights_refusal_of, the float16 runner
    failed in QuantizedLinear with a ValueError naming no leaf, the compiled one built, and the
    hybrid loaded dense, ignoring the leaf."""
    given, message = REFUSALS[case]
    model_dir = (
        build_tiny_hybrid_checkpoint(tmp_path / "hybrid", family="qwen3_next")
        if given.get("hybrid")
        else tiny_checkpoint("LlamaForCausalLM", **TINY)
    )
    exec = ExecBag(graph=GraphBag(enable_torch_compile=bool(given.get("compiled"))))
    publish(
        Bags(
            model=ModelBag(model_path=str(model_dir), dtype=given.get("dtype", "auto"), quantization="int8"),
            memory=POOL,
            exec=exec,
        ),
        role="standalone",
    )
    with pytest.raises(UnsupportedConfigError, match=message):
        ModelRunner(build_attention_pair, linear_attn_factory=LinearAttnBackendFactory())


def test_the_refusal_names_a_device_without_the_kernels(tiny_checkpoint: Callable[..., Path]) -> None:
    """No CUDA device here to build a runner on: the refusal itself, as the runner and serve's rule ask it."""
    from runtime_runner.loading.arch_config import read_arch_config
    from runtime_runner.loading.quantization_support import quantized_weights_refusal_of

    llama = tiny_checkpoint("LlamaForCausalLM", **TINY)
    model = ModelBag(model_path=str(llama), quantization="int8")
    reason = quantized_weights_refusal_of(model, ExecBag(), "cuda", None, lambda: read_arch_config(llama))
    assert (
        reason == "quantization = 'int8': the quantized kernels run on a CPU only, not on cuda; accepted: device = cpu"
    )
    assert quantized_weights_refusal_of(model, ExecBag(), "cpu", None, lambda: read_arch_config(llama)) is None
