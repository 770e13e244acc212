"""A GGUF checkpoint served as it is: tiny random Llama (with attention biases), Qwen2 (tied) and
Qwen3 models written as llama.cpp lays a GGUF file out (serve_testing.tiny_gguf: gguf-py's names,
Llama's Q/K rows interleaved for its rotary layout), their matrices in Q8_0, Q4_0 or Q4_1, a mix
of every K-quant (Q2_K..Q6_K) and 32-value type (Q5_0, Q5_1, IQ4_NL), or llama-quantize's Q4_K_M
choices (serve_testing.llama_quantize_mix: fused groups of mixed types, K-quants substituted where
rows are not whole super-blocks, F16 where not whole blocks), kept in their blocks, and their
reference: the same weights de-quantized, saved as a safetensors checkpoint.

Tolerances, and why:
- the runner on the GGUF against the runner on the reference, both fp32 and batch-invariant: equal
  bitwise. The quantized kernel computes the batch-invariant fp32 linear of the de-quantized matrix
  (the same fp32 chain over k as InvariantLinear), and a quantized embedding row is its
  de-quantized row, so nothing differs but where the weights come from;
- with batch invariance off the reference runs oneDNN's fp32 matmul, which sums in another order:
  1e-5;
- against transformers loading the GGUF file itself (its own de-quantization and un-interleaving):
  atol/rtol 1e-4 (fp32, as the runner parity tests), and the same greedy tokens.
"""

from __future__ import annotations

import importlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
import torch

from attn_backends import build_attention_pair
from config_bags import publish, unpublish
from config_bags.server import Bags, ExecBag, KernelBag, MemoryBag, ModelBag
from runtime_runner.errors import CheckpointError, UnsupportedConfigError
from runtime_runner.kernels.quantized_embedding import QuantizedEmbedding
from runtime_runner.kernels.quantized_linear import QuantizedLinear
from runtime_runner.loading.gguf.file import GgufFile
from runtime_runner.loading.weight_matrix import KernelOwned, kind_of
from runtime_runner.models.decoder import DecoderForCausalLM
from runtime_runner.runner import ModelRunner
from runtime_runner.standalone import StandaloneDriver
from serve_testing.llama_quantize_mix import q4_k_m_types
from serve_testing.tiny_gguf import rewritten_gguf, write_tiny_gguf

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
# id -> (transformers class, config overrides, GGUF type of the matrices)
CASES: dict[str, tuple[str, dict[str, Any], str]] = {
    "llama-q8_0": ("LlamaForCausalLM", {"attention_bias": True}, "Q8_0"),
    "llama-q4_0": ("LlamaForCausalLM", {"attention_bias": True}, "Q4_0"),
    "llama-q4_1": ("LlamaForCausalLM", {"attention_bias": True}, "Q4_1"),
    "llama-bf16": ("LlamaForCausalLM", {}, "BF16"),
    "qwen2-tied-q4_0": ("Qwen2ForCausalLM", {"tie_word_embeddings": True}, "Q4_0"),
    # transformers reads a qwen3 GGUF with its default head_dim of 128, so the fixture has it.
    "qwen3-q8_0": ("Qwen3ForCausalLM", {"head_dim": 128}, "Q8_0"),
    # Rows of 256 (the K-quants' super-block) and a down projection of 288 (32-value blocks only).
    "llama-k-quants": ("LlamaForCausalLM", {"hidden_size": 256, "intermediate_size": 288}, "Q4_K"),
    # llama-quantize's Q4_K_M (TYPES below): rows of 320, not whole super-blocks, as the default
    # model's 576 (Q5_0 and Q8_0 substitutes, a tied Q8_0 embedding), down projections of 512.
    "llama-q4_k_m": (
        "LlamaForCausalLM",
        {"hidden_size": 320, "intermediate_size": 512, "attention_bias": True, "tie_word_embeddings": True},
        "Q4_K",
    ),
    # Q4_K_M of rows of 256 (Q4_K with a Q6_K v, a tied Q6_K embedding) and down projections of
    # 272, not whole 32-value blocks (F16), layer 0's v made F16 as `--tensor-type attn_v=f16` can.
    "qwen2-q4_k_m": (
        "Qwen2ForCausalLM",
        {"hidden_size": 256, "intermediate_size": 272, "tie_word_embeddings": True},
        "Q4_K",
    ),
}
Q4_K_M_CASES = ("llama-q4_k_m", "qwen2-q4_k_m")
# Per-tensor types of a case (the rest in its matrix type): every K-quant and 32-value type the
# kernels serve, one per fused group (q|k|v, gate|up), and a Q4_K down projection of 288-wide rows
# stored as llama-quantize substitutes it (Q5_0), as in a Q4_K_M file.
_LAYER = "model.layers.{}."
TYPES: dict[str, dict[str, str]] = {
    "llama-k-quants": {
        **{f"{_LAYER.format(0)}self_attn.{p}_proj.weight": "Q4_K" for p in "qkv"},
        f"{_LAYER.format(0)}self_attn.o_proj.weight": "Q5_K",
        **{f"{_LAYER.format(0)}mlp.{p}_proj.weight": "Q6_K" for p in ("gate", "up")},
        f"{_LAYER.format(0)}mlp.down_proj.weight": "Q4_K",
        **{f"{_LAYER.format(1)}self_attn.{p}_proj.weight": "Q2_K" for p in "qkv"},
        f"{_LAYER.format(1)}self_attn.o_proj.weight": "Q3_K",
        **{f"{_LAYER.format(1)}mlp.{p}_proj.weight": "Q4_K" for p in ("gate", "up")},
        f"{_LAYER.format(1)}mlp.down_proj.weight": "Q5_1",
        "model.embed_tokens.weight": "Q6_K",
        "lm_head.weight": "IQ4_NL",
    }
}
TYPES["qwen2-q4_k_m"] = {f"{_LAYER.format(0)}self_attn.v_proj.weight": "F16"}
PROMPTS = ([5, 17, 99, 3, 42, 8, 64, 1, 120], [7, 7, 30], list(range(40, 66)))
NEW_TOKENS = 6
POOL = MemoryBag(max_total_tokens=16384)  # the default prefill budget fits it
Build = Callable[..., ModelRunner]


@pytest.fixture
def runner_of(standalone_runner: Build) -> Build:
    """`standalone_runner` over a small pool, each build publishing afresh; its quantized matrices
    read float32 activations (BITWISE) unless the test passes its own exec bag."""

    def build(model: Path, **bags: Any) -> ModelRunner:
        unpublish()
        return standalone_runner(model, memory=POOL, **{"exec": BITWISE, **bags})

    return build


def _model(architecture: str, overrides: dict[str, Any]) -> Any:
    transformers: Any = importlib.import_module("transformers")
    torch.manual_seed(0)
    config = getattr(transformers, architecture.replace("ForCausalLM", "Config"))(**{**TINY, **overrides})
    return getattr(transformers, architecture)(config).eval()


def _types(case: str, model: Any) -> dict[str, str]:
    """The case's per-tensor types: llama-quantize's Q4_K_M choices for a Q4_K_M case, TYPES over them."""
    chosen = q4_k_m_types(model) if case in Q4_K_M_CASES else {}
    return {**chosen, **TYPES.get(case, {})}


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Each case's (GGUF file, de-quantized reference directory)."""
    written = {}
    for case, (architecture, overrides, kind) in CASES.items():
        model = _model(architecture, overrides)
        written[case] = write_tiny_gguf(model, tmp_path_factory.mktemp(case), kind, types=_types(case, model))
    return written


Outcome = tuple[torch.Tensor, list[list[int]]]
# The rule a GGUF file is held to bitwise against its de-quantized reference: float32 activations
# (a GGUF file reads int8 ones by default; test_int8_activations_... holds those to a tolerance).
BITWISE = ExecBag(kernel=KernelBag(quantized_activations="float32"))


def _prefill_and_greedy(runner: ModelRunner) -> Outcome:
    """The prompts' last logits, prefilled together, and their greedy tokens, decoded together."""
    driver = StandaloneDriver(runner)
    return driver.prefill_logits(PROMPTS), driver.generate(PROMPTS, NEW_TOKENS)


@pytest.fixture(scope="module")
def served(written: dict[str, tuple[Path, Path]]) -> dict[str, tuple[Outcome, Outcome]]:
    """Each case's outcome on the GGUF and on its reference (fp32, batch-invariant), computed once."""
    outcomes = {}
    for case, (gguf_file, reference) in written.items():
        pair = []
        for model in (gguf_file, reference):
            unpublish()
            publish(
                Bags(model=ModelBag(model_path=str(model), dtype="float32"), memory=POOL, exec=BITWISE),
                role="standalone",
            )
            pair.append(_prefill_and_greedy(ModelRunner(build_attention_pair)))
        outcomes[case] = (pair[0], pair[1])
    unpublish()
    return outcomes


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_gguf_serves_its_dequantized_weights_bitwise(case: str, served: dict[str, tuple[Outcome, Outcome]]) -> None:
    """Reverse-verified: with llama left out of loading.gguf.arch.PERMUTED_QK (the Q/K rows left
    interleaved) every llama case failed here and against transformers, and the others passed."""
    on_gguf, on_reference = served[case]
    assert torch.equal(on_gguf[0], on_reference[0])
    assert on_gguf[1] == on_reference[1]


@pytest.mark.parametrize("case", ["llama-q4_1", "qwen2-tied-q4_0"])
def test_without_batch_invariance_the_gguf_still_runs_its_quantized_kernel(
    case: str, written: dict[str, tuple[Path, Path]], runner_of: Build
) -> None:
    """Reverse-verified: with linear_of packing a de-quantized copy (a PackedLinear) when batch
    invariance is off, the kind check failed (the logits still agreed: only the memory differed)."""
    gguf_file, reference = written[case]
    loose = ExecBag(kernel=KernelBag(enable_deterministic_inference=False, quantized_activations="float32"))
    runner = runner_of(gguf_file, exec=loose)
    assert not runner.batch_invariant and isinstance(runner.model.projections[0].qkv, QuantizedLinear)
    served = _prefill_and_greedy(runner)
    expected = _prefill_and_greedy(runner_of(reference, exec=loose))
    torch.testing.assert_close(served[0], expected[0], atol=1e-5, rtol=1e-5)
    assert served[1] == expected[1]


# One case per family (the Llama one interleaved and Q4_1, the Qwen2 one tied): transformers' load is
# the slow part, and the other cases equal their reference bitwise, which is de-quantized apart.
@pytest.mark.parametrize("case", ["llama-q4_1", "qwen2-tied-q4_0", "qwen3-q8_0", "llama-k-quants", "llama-q4_k_m"])
def test_the_gguf_agrees_with_transformers_reading_the_same_file(
    case: str, written: dict[str, tuple[Path, Path]], served: dict[str, tuple[Outcome, Outcome]]
) -> None:
    from transformers import AutoModelForCausalLM

    gguf_file, _ = written[case]
    model: Any = AutoModelForCausalLM.from_pretrained(
        gguf_file.parent, gguf_file=gguf_file.name, dtype=torch.float32
    ).eval()
    with torch.inference_mode():
        expected = torch.stack([model(torch.tensor([prompt])).logits[0, -1] for prompt in PROMPTS])
        tokens = [
            model.generate(
                torch.tensor([p]),
                attention_mask=torch.ones(1, len(p), dtype=torch.long),
                max_new_tokens=NEW_TOKENS,
                do_sample=False,
                eos_token_id=None,
                pad_token_id=0,
            )[0, len(p) :].tolist()
            for p in PROMPTS
        ]
    logits, greedy = served[case][0]
    torch.testing.assert_close(logits, expected, atol=1e-4, rtol=1e-4)
    assert greedy == tokens


def test_a_quantized_matrix_is_held_once_and_a_tied_head_is_the_embedding(
    written: dict[str, tuple[Path, Path]], runner_of: Build
) -> None:
    """Every quantized matrix lives only in its kernel's panels (the decoder's weights keep its
    description), and a tied model's embedding reads its LM head's panels.

    Reverse-verified: without `weights.released()` in the decoder the QuantizedTensors stayed in its
    weights; with the tied head left unshared (`tied_head` None) the embedding packed its own table."""
    runner = runner_of(written["qwen2-tied-q4_0"][0])
    model = runner.model
    held = [
        model.weights.embed,
        model.weights.lm_head,
        *(m for layer in model.weights.layers for m in (layer.qkv, layer.o_proj, layer.gate_up, layer.down)),
    ]
    assert all(isinstance(matrix, KernelOwned) and matrix.kind == "q4_0" for matrix in held)
    embedding = model._embedding
    assert isinstance(embedding, QuantizedEmbedding) and embedding.table is model.head_projection


def test_a_tensor_of_a_type_not_served_is_refused_naming_it(tmp_path: Path, runner_of: Build) -> None:
    """Reverse-verified (with Q5_0, before it was served): without the type check in GgufFile the
    embedding was read as if it were dense, and the load failed with a RuntimeError naming no
    tensor ("Unknown device: 84")."""
    gguf_file, _ = write_tiny_gguf(
        _model("LlamaForCausalLM", {}), tmp_path / "mxfp4", "Q4_0", types={"model.embed_tokens.weight": "MXFP4"}
    )
    with pytest.raises(
        UnsupportedConfigError,
        match=r"model\.gguf: tensor token_embd\.weight is MXFP4, a type this build does not "
        r"serve; accepted: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K$",
    ):
        runner_of(gguf_file)


def test_the_k_quant_mix_holds_every_type_and_serves_each_quantized(
    written: dict[str, tuple[Path, Path]], runner_of: Build
) -> None:
    """The mix is what its case says (the Q4_K down projection of 288-wide rows substituted by
    Q5_0), and every matrix stays in its kind's blocks in the runner. Reverse-verified by hand:
    with Q6_K left out of KIND_OF_TYPE the file was refused naming token_embd.weight's Q6_K."""
    gguf_file, _ = written["llama-k-quants"]
    assert dict(GgufFile(gguf_file).type_counts()) == {
        "F32": 5,
        "Q2_K": 3,
        "Q3_K": 1,
        "Q4_K": 5,
        "Q5_0": 1,
        "Q5_K": 1,
        "Q5_1": 1,
        "Q6_K": 3,
        "IQ4_NL": 1,
    }
    weights = runner_of(gguf_file).model.weights
    layers = [[kind_of(m) for m in (layer.qkv, layer.o_proj, layer.gate_up, layer.down)] for layer in weights.layers]
    assert layers == [["q4_k", "q5_k", "q6_k", "q5_0"], ["q2_k", "q3_k", "q4_k", "q5_1"]]
    assert (kind_of(weights.embed), kind_of(weights.lm_head)) == ("q6_k", "iq4_nl")


def test_the_q4_k_m_mixes_hold_llama_quantizes_choices_and_serve_each_run_in_its_kind(
    written: dict[str, tuple[Path, Path]], runner_of: Build
) -> None:
    """The files hold what llama-quantize's Q4_K_M writes for these shapes (counted by hand from
    src/llama-quant.cpp: of 2 layers, layer 1 gets more bits), and each fused group of several
    types is kept as runs of one kind, nothing de-quantized.

    Reverse-verified by hand: with more_bits picking layer 0 instead, the counts failed; with
    stored_type's F16 fallback left out, writing the qwen2 file failed (Q5_0 rows of 272)."""
    llama, qwen2 = (GgufFile(written[case][0]) for case in Q4_K_M_CASES)
    # 320-wide rows: Q4_K -> Q5_0, Q6_K -> Q8_0; the tied embedding Q8_0; down projections (512) Q4_K, Q6_K.
    assert dict(llama.type_counts()) == {"F32": 13, "Q4_K": 1, "Q5_0": 11, "Q6_K": 1, "Q8_0": 2}
    # 256-wide rows: Q4_K, a Q6_K v in layer 1, the tied embedding Q6_K; down projections (272) F16,
    # and layer 0's v F16 as asked.
    assert dict(qwen2.type_counts()) == {"F16": 3, "F32": 11, "Q4_K": 10, "Q6_K": 2}
    kinds = {}
    for case in Q4_K_M_CASES:
        weights = runner_of(written[case][0]).model.weights
        kinds[case] = [[kind_of(m) for m in (layer.qkv, layer.gate_up, layer.down)] for layer in weights.layers]
        kinds[case].append([kind_of(weights.embed)])
    assert kinds["llama-q4_k_m"] == [["q5_0", "q5_0", "q4_k"], ["q5_0|q8_0", "q5_0", "q6_k"], ["q8_0"]]
    assert kinds["qwen2-q4_k_m"] == [["q4_k|float32", "q4_k", "float32"], ["q4_k|q6_k", "q4_k", "float32"], ["q6_k"]]


@pytest.mark.parametrize("case", Q4_K_M_CASES)
def test_a_q4_k_m_mix_serves_its_dequantized_weights_bitwise_op_by_op_and_in_the_native_step(
    case: str, written: dict[str, tuple[Path, Path]], served: dict[str, tuple[Outcome, Outcome]], runner_of: Build
) -> None:
    """A group of several kinds runs each run through its own kernel (ConcatProjection), op by op,
    and in the native step through the projection stack: both give the reference's bits, prompts
    prefilled together and decoded together.

    Reverse-verified by hand: with projection_stack.cpp not advancing a part's first column, the
    native step's logits differed from the reference's in both cases (op by op passed); with
    group_projection running a StackedRows' runs in reverse order both paths failed."""
    gguf_file, _ = written[case]
    expected = served[case][1]
    native_runner = runner_of(gguf_file)
    assert native_runner.native_step is not None, "the native step declined a Q4_K_M mix"
    before = native_runner.native_step.forwards
    native = _prefill_and_greedy(native_runner)
    assert native_runner.native_step.forwards > before
    op_by_op_runner = runner_of(gguf_file)
    op_by_op_runner.native_step = None
    op_by_op = _prefill_and_greedy(op_by_op_runner)
    outcomes = {"native step": native, "op by op": op_by_op}
    differing = [
        path for path, got in outcomes.items() if not torch.equal(got[0], expected[0]) or got[1] != expected[1]
    ]
    assert differing == []


def test_a_tensor_without_a_place_is_refused_naming_it(
    written: dict[str, tuple[Path, Path]], tmp_path: Path, runner_of: Build
) -> None:
    """llama.cpp writes Llama 3's rope scaling as a rope_freqs tensor, which this decoder would ignore.

    Reverse-verified: with GgufFile skipping a tensor it has no name for, the file loaded."""
    gguf_file = rewritten_gguf(
        written["llama-q8_0"][0],
        tmp_path / "rope.gguf",
        extra=[("rope_freqs.weight", np.ones(8, dtype=np.float32), gguf.GGMLQuantizationType.F32)],
    )
    with pytest.raises(
        UnsupportedConfigError,
        match=r"rope\.gguf: tensor rope_freqs\.weight has no place in this build's llama decoder",
    ):
        runner_of(gguf_file)


def test_an_architecture_not_served_from_gguf_is_refused_naming_it(
    written: dict[str, tuple[Path, Path]], tmp_path: Path, runner_of: Build
) -> None:
    """llama.cpp's BERT embedding files (all-MiniLM-L6-v2 through its converter) hold tensors such
    as token_embd_norm.bias: the architecture is named, not the first odd tensor. Reverse-verified:
    without GgufFile's architecture check the refusal named token_embd_norm.bias instead."""
    gguf_file = rewritten_gguf(
        written["llama-q8_0"][0],
        tmp_path / "bert.gguf",
        extra=[("token_embd_norm.bias", np.zeros(8, dtype=np.float32), gguf.GGMLQuantizationType.F32)],
        architecture="bert",
    )
    with pytest.raises(
        UnsupportedConfigError,
        match=r"bert\.gguf: GGUF architecture 'bert' is not served from GGUF; accepted: llama, qwen2, qwen3",
    ):
        runner_of(gguf_file)


def test_a_tensor_its_decoder_never_reads_is_refused_at_load(
    written: dict[str, tuple[Path, Path]], tmp_path: Path, runner_of: Build
) -> None:
    """Qwen2 reads no o bias: a file holding one in every layer agrees with its own metadata, and
    the loader would drop it. Reverse-verified: without refuse_misfit_gguf in load_target the
    runner served the file without its biases."""
    source = written["qwen2-tied-q4_0"][0]
    bias = np.ones(64, dtype=np.float32)
    with_one = rewritten_gguf(
        source, tmp_path / "one.gguf", extra=[("blk.0.attn_output.bias", bias, gguf.GGMLQuantizationType.F32)]
    )
    both = rewritten_gguf(
        with_one, tmp_path / "both.gguf", extra=[("blk.1.attn_output.bias", bias, gguf.GGMLQuantizationType.F32)]
    )
    with pytest.raises(
        CheckpointError,
        match=r"both\.gguf: tensor blk\.0\.attn_output\.bias \(and 1 more\) has no place in Qwen2ForCausalLM",
    ):
        runner_of(both)


def test_a_directory_of_one_gguf_is_served_and_of_two_is_refused(
    written: dict[str, tuple[Path, Path]], tmp_path: Path, runner_of: Build
) -> None:
    """Reverse-verified: without the count check in gguf_file_of the directory of two files served the first."""
    gguf_file, reference = written["llama-q8_0"]
    folder = tmp_path / "folder"
    folder.mkdir()
    shutil.copy(gguf_file, folder / "one.gguf")
    assert torch.equal(_prefill_and_greedy(runner_of(folder))[0], _prefill_and_greedy(runner_of(reference))[0])
    shutil.copy(gguf_file, folder / "two.gguf")
    with pytest.raises(
        CheckpointError, match=r"holds 2 GGUF files \(one\.gguf, two\.gguf\); accepted: a model path naming one"
    ):
        runner_of(folder)


@pytest.mark.parametrize("case", ["llama-k-quants", "llama-q4_k_m"])
def test_int8_activations_stay_near_the_dequantized_model_and_batch_invariant(
    case: str, written: dict[str, tuple[Path, Path]], served: dict[str, tuple[Outcome, Outcome]], runner_of: Build
) -> None:
    """A GGUF file's matrices read int8 activations with the leaf unset, as a launch resolves it
    (exec.kernel.quantized_activations; the integer rule of integer_linear.h); the prompts' last
    logits stay within 5% of the de-quantized model's logit range of its own (x rounded to int8 per
    32 values, about 0.4% per value, through two random layers; greedy agreement on clear-margin
    prompts is measured on real models by tools/check_llama_quantize.py --activations int8), and
    every prompt's logits and greedy tokens are bitwise the same prefilled and decoded together as
    alone. Reverse-verified: with linear_of dropping the leaf (float32 activations) the kind check
    failed. The bound is about 4x the largest error seen on these cases (1.1% and 1.3% of the
    range)."""
    gguf_file, _ = written[case]
    runner = runner_of(gguf_file, exec=ExecBag())
    assert isinstance(runner.model, DecoderForCausalLM)
    projections = runner.model.projections[0]
    assert isinstance(projections.o, QuantizedLinear) and projections.o.activations == "int8"
    logits, greedy = _prefill_and_greedy(runner)
    reference = served[case][1][0]
    bound = 0.05 * float(reference.amax() - reference.amin())
    assert float((logits - reference).abs().max()) <= bound
    driver = StandaloneDriver(runner)
    for i, prompt in enumerate(PROMPTS):
        assert torch.equal(driver.prefill_logits([prompt])[0], logits[i])
        assert driver.generate([prompt], NEW_TOKENS)[0] == greedy[i]
