"""Launching a GGUF checkpoint or --quantization int8: what resolution declares (a tokenizer written
once from the GGUF metadata into the model cache, the name the API serves, the context from the
metadata), and the one-line refusals, at launch and on every override, of quantized weights where
their kernels cannot run, and of a GGUF file its decoder would read otherwise than it holds; a
Q4_K_M mix (fused groups of mixed types) resolves.

The launch cases run `serve`'s own entry point in this process with --dump-config (as
tests/test_e2e_bad_input_launch.py does), so a case that wrongly resolved prints its config.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType

import config_bags
import config_bags.server
import native_build
from config_bags import LeafValueError
from runtime_runner.loading.default_model import CACHE_ENV, bundled_gguf
from runtime_runner.loading.gguf.tokenizer_cache import gguf_tokenizer_dir
from serve.launch_rules import QUANTIZED_WEIGHTS_RUN_HERE
from serve.main import main
from serve.record import ServerArgs, project, resolve
from serve_testing.llama_quantize_mix import q4_k_m_types
from serve_testing.tiny_checkpoint import build_tiny_checkpoint
from serve_testing.tiny_gguf import rewritten_gguf, write_tiny_gguf
from serve_testing.tiny_hybrid_checkpoint import build_tiny_hybrid_checkpoint


@pytest.fixture(autouse=True)
def _unpublished() -> Iterator[None]:
    config_bags.unpublish()
    yield
    config_bags.unpublish()


@pytest.fixture(scope="module")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh model cache, so the tokenizer is written by this module's first launch."""
    saved = os.environ.get(CACHE_ENV)
    os.environ[CACHE_ENV] = str(tmp_path_factory.mktemp("model-cache"))
    yield Path(os.environ[CACHE_ENV])
    if saved is None:
        del os.environ[CACHE_ENV]
    else:
        os.environ[CACHE_ENV] = saved


@pytest.fixture(scope="module")
def dense(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("dense") / "tiny-llama", max_position_embeddings=4096)


def test_a_gguf_resolves_its_tokenizer_name_and_context_from_the_file(model_cache: Path) -> None:
    """Reverse-verified: with the tokenizer_path handler declaring model_path for a GGUF file (as
    for a directory) the tokenizer directory was the file itself; with served_model_name naming
    the path's last part, the name kept its .gguf."""
    gguf = bundled_gguf()
    args = resolve(ServerArgs(model_path=str(gguf))).server_args
    assert (
        args.tokenizer_path == str(gguf_tokenizer_dir(gguf)) and Path(args.tokenizer_path).parent.parent == model_cache
    )
    assert args.provenance_of("tokenizer_path") == "resolved:tokenizer_path"
    assert args.served_model_name == "SmolLM2-135M-Instruct.Q4_1"
    assert args.context_length == 8192
    from transformers import AutoTokenizer

    tokenizer: Any = AutoTokenizer.from_pretrained(args.tokenizer_path)
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.chat_template is not None
    written = (Path(args.tokenizer_path) / "tokenizer.json").stat().st_mtime_ns
    resolve(ServerArgs(model_path=str(gguf)))
    assert (Path(args.tokenizer_path) / "tokenizer.json").stat().st_mtime_ns == written, "written once"


def test_an_operators_tokenizer_is_kept_and_nothing_is_written(tmp_path: Path, dense: Path, model_cache: Path) -> None:
    """Reverse-verified: with the handler writing the GGUF's tokenizer whatever the operator set, it was written."""
    gguf = tmp_path / "copy.gguf"
    gguf.symlink_to(bundled_gguf())
    args = resolve(ServerArgs(model_path=str(gguf), tokenizer_path=str(dense))).server_args
    assert args.tokenizer_path == str(dense) and not gguf_tokenizer_dir(gguf).exists()


def _transformers_model(architecture: str, **config: Any) -> Any:
    transformers: Any = importlib.import_module("transformers")
    torch.manual_seed(0)
    sizes = dict(
        vocab_size=128,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
    )
    return getattr(transformers, architecture)(
        getattr(transformers, architecture.replace("ForCausalLM", "Config"))(**{**sizes, **config})
    )


# (id, the model: "gguf" (the bundled file), "dense", "hybrid" or "mxfp4", argv, what the one line must name)
CASES: list[tuple[str, str, list[str], list[str]]] = [
    (
        "int8 of a gguf",
        "gguf",
        ["--quantization", "int8"],
        [
            "quantization = 'int8' quantizes a bf16/fp32 checkpoint at load",
            "is a GGUF checkpoint, quantized already",
            "rule quantized_weights_run_here",
            "--quantization int8",
        ],
    ),
    (
        "gguf compiled",
        "gguf",
        ["--enable-torch-compile", "--enable-deterministic-inference", "false"],
        ["(GGUF): enable_torch_compile compiles the dense decode step, and quantized weights decode eagerly"],
    ),
    (
        "gguf in float16",
        "gguf",
        ["--dtype", "float16"],
        ["(GGUF): the quantized kernels compute in float32 or bfloat16, and dtype = 'float16' computes in float16"],
    ),
    (
        "int8 in float16",
        "dense",
        ["--quantization", "int8", "--dtype", "float16"],
        ["quantization = 'int8': the quantized kernels"],
    ),
    (
        "int8 of a hybrid",
        "hybrid",
        ["--quantization", "int8"],
        [
            "quantization = 'int8': Qwen3NextForCausalLM is not served with quantized weights; accepted: "
            "LlamaForCausalLM"
        ],
    ),
    (
        "int8 activations of dense weights",
        "dense",
        ["--quantized-activations", "int8"],
        [
            "quantized_activations = 'int8' reads a GGUF checkpoint's quantized matrices",
            "holds dense weights; accepted: quantized_activations = 'float32', or a GGUF model_path",
        ],
    ),
    (
        "int8 activations of int8 weights",
        "dense",
        ["--quantized-activations", "int8", "--quantization", "int8"],
        ["holds int8 per-channel weights (quantization = 'int8')"],
    ),
    (
        "a tier for dense weights",
        "dense",
        ["--cpu-isa", "avx2"],
        [
            "cpu_isa = 'avx2' chooses the instruction tier of the integer kernels, and no matrix runs them "
            "(quantized_activations = 'float32')",
            "rule quantized_weights_run_here",
        ],
    ),
    (
        "a tier for float32 activations",
        "gguf",
        ["--cpu-isa", "avx2", "--quantized-activations", "float32"],
        ["no matrix runs them (quantized_activations = 'float32'); accepted: cpu_isa unset"],
    ),
    (
        "a type not served",
        "mxfp4",
        [],
        ["tensor token_embd.weight is MXFP4, a type this build does not serve; accepted: F32, F16"],
    ),
    (
        "a gguf draft",
        "dense",
        ["--speculative-algorithm", "draft_model", "--speculative-draft-model-path", "GGUF"],
        ["is a GGUF checkpoint, and a draft is read from a Hugging Face checkpoint directory only"],
    ),
]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory, dense: Path) -> dict[str, Path]:
    mxfp4, _ = write_tiny_gguf(
        _transformers_model("LlamaForCausalLM"),
        tmp_path_factory.mktemp("mxfp4"),
        "Q4_0",
        types={"model.embed_tokens.weight": "MXFP4"},
    )
    return {
        "gguf": bundled_gguf(),
        "dense": dense,
        "mxfp4": mxfp4,
        "hybrid": build_tiny_hybrid_checkpoint(tmp_path_factory.mktemp("hybrid"), family="qwen3_next"),
    }


@pytest.mark.parametrize(("model", "argv", "needles"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_quantized_weights_where_they_cannot_run_exit_2_with_one_line(
    model: str,
    argv: list[str],
    needles: list[str],
    models: dict[str, Path],
    model_cache: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Reverse-verified: with QUANTIZED_WEIGHTS_RUN_HERE answering nothing, the five cases it
    states resolved and printed their config (and the two int8-activation cases, added later, with
    int8_activations_refusal_of answering nothing); with the draft handler reading a GGUF draft as a
    directory, its line said only that the path holds no config.json; with cpu_isa_refusal_of answering
    nothing, both cpu_isa cases resolved."""
    argv = [str(models["gguf"]) if arg == "GGUF" else arg for arg in argv]
    assert main(["--model-path", str(models[model]), *argv, "--dump-config"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and lines[0].startswith("serve: error: "), captured.err
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_a_gguf_reads_int8_activations_on_this_cpus_tier_by_default(model_cache: Path) -> None:
    """A GGUF file runs the integer kernels with no flag (quantized_kernels declares int8 and the
    highest tier this CPU runs); the operator's float32 and a lower tier are kept, and a dense
    checkpoint gets float32 and no tier. Reverse-verified: with the handler removed, a GGUF launch
    resolved quantized_activations unset and cpu_isa unset (the runner then read float32)."""
    args = resolve(ServerArgs(model_path=str(bundled_gguf()))).server_args
    assert (args.quantized_activations, args.cpu_isa) == ("int8", native_build.detected_tier())
    assert args.provenance_of("quantized_activations") == "resolved:quantized_kernels"
    assert args.provenance_of("cpu_isa") == "resolved:quantized_kernels"
    kept = resolve(ServerArgs(model_path=str(bundled_gguf()), quantized_activations="float32")).server_args
    assert (kept.quantized_activations, kept.cpu_isa, kept.provenance_of("quantized_activations")) == (
        "float32",
        None,
        "cli",
    )
    lower = resolve(ServerArgs(model_path=str(bundled_gguf()), cpu_isa="avx2")).server_args
    assert (lower.quantized_activations, lower.cpu_isa) == ("int8", "avx2")


def test_explain_says_why_a_gguf_reads_int8(model_cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--model-path", str(bundled_gguf()), "--explain", "quantized_activations"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("quantized_activations = 'int8'\n") and "resolved:quantized_kernels" in text, text
    assert "llama.cpp's arithmetic" in text, text


def _tier_above(tier: native_build.CpuTier) -> Any:
    if native_build.tier_runs_here(tier):
        return pytest.param(
            tier,
            id=f"{tier}-runs-on-this-cpu",
            marks=pytest.mark.skip(reason=f"this CPU runs {tier} (its highest: {native_build.detected_tier()})"),
        )
    return pytest.param(tier, id=tier)


@pytest.mark.parametrize("tier", [_tier_above(t) for t in native_build.TIERS])
def test_a_tier_above_this_cpus_exits_2_with_one_line(
    tier: native_build.CpuTier, model_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A tier this CPU lacks is refused before anything is built (where every tier runs, as on an
    AMX Xeon, each case is skipped with the reason in its id; cpu_isa_refusal_of's other two
    refusals, tested above, were reverse-verified there)."""
    assert main(["--model-path", str(bundled_gguf()), "--cpu-isa", tier, "--dump-config"]) == 2
    line = capsys.readouterr().err.strip()
    assert f"cpu_isa = {tier!r} is above this CPU's highest instruction tier" in line and "\n" not in line, line


def test_dump_config_and_explain_show_the_leaf(dense: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--model-path", str(dense), "--quantization", "int8", "--dump-config"]) == 0
    dumped = json.loads(capsys.readouterr().out)
    assert json.dumps(dumped).count('"quantization"') >= 1
    assert main(["--model-path", str(dense), "--quantization", "int8", "--explain", "quantization"]) == 0
    text = capsys.readouterr().out
    assert (
        text.startswith("quantization = 'int8'\n")
        and "provenance: cli" in text
        and "Quantize a bf16/fp32 checkpoint" in text
    )


@pytest.mark.parametrize("leaves", [{"quantization": "int8"}, {"dtype": "float16"}], ids=["int8", "float16"])
def test_a_refused_override_changes_nothing(leaves: dict[str, Any], model_cache: Path) -> None:
    """A startup override of a GGUF launch's bags is checked against the rule as the launch is.

    Reverse-verified: with QUANTIZED_WEIGHTS_RUN_HERE answering nothing, both overrides applied."""
    resolved = resolve(ServerArgs(model_path=str(bundled_gguf())))
    config_bags.publish(project(resolved), role="standalone", rules=(QUANTIZED_WEIGHTS_RUN_HERE,))
    before = (config_bags.server.published_bags(), config_bags.config_hash())
    with pytest.raises(LeafValueError, match="rule quantized_weights_run_here|quantized"):
        config_bags.override("admin", **leaves)
    assert (config_bags.server.published_bags(), config_bags.config_hash()) == before
    assert config_bags.overrides_log() == []


# (id, the transformers model, the file's change, what the one line must name)
MISFITS: list[tuple[str, tuple[str, dict[str, Any]], Callable[[Path, Path], Path], list[str]]] = [
    (
        "qwen2 without its q/k/v biases",
        ("Qwen2ForCausalLM", {}),
        lambda source, target: rewritten_gguf(
            source, target, lambda name: ".attn_" in name and name.endswith(".bias"), []
        ),
        ["lacks tensor blk.0.attn_q.bias (and 5 more), which Qwen2ForCausalLM reads"],
    ),
    (
        "qwen2 with an o bias",
        ("Qwen2ForCausalLM", {}),
        lambda source, target: rewritten_gguf(
            source,
            target,
            lambda name: False,
            [(f"blk.{i}.attn_output.bias", np.ones(64, np.float32), GGMLQuantizationType.F32) for i in range(2)],
        ),
        ["tensor blk.0.attn_output.bias (and 1 more) has no place in Qwen2ForCausalLM, which reads no such tensor"],
    ),
    (
        "a Q8_0 norm",
        ("LlamaForCausalLM", {}),
        lambda source, target: rewritten_gguf(
            source,
            target,
            lambda name: name == "blk.0.attn_norm.weight",
            [
                (
                    "blk.0.attn_norm.weight",
                    np.asarray(gguf.quants.quantize(np.ones(64, np.float32), GGMLQuantizationType.Q8_0)),
                    GGMLQuantizationType.Q8_0,
                )
            ],
        ),
        ["tensor blk.0.attn_norm.weight is Q8_0, a block type the kernels serve for matrices, but it is a vector"],
    ),
]


@pytest.mark.parametrize(("model", "change", "needles"), [c[1:] for c in MISFITS], ids=[c[0] for c in MISFITS])
def test_a_gguf_its_decoder_would_read_otherwise_exits_2_with_one_line(
    model: tuple[str, dict[str, Any]],
    change: Callable[[Path, Path], Path],
    needles: list[str],
    tmp_path: Path,
    model_cache: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Each passed agreement with its own metadata and would have failed (or, the unread o bias,
    silently been dropped) only in the loading child. Reverse-verified by hand: without the
    gguf_fits_its_decoder handler the first two were refused only for lacking a tokenizer (the tiny
    files hold none); without the vector check in agreement, the Q8_0 norm likewise."""
    source, _ = write_tiny_gguf(_transformers_model(model[0], **model[1]), tmp_path / "source", "Q8_0")
    misfit = change(source, tmp_path / "misfit.gguf")
    capsys.readouterr()  # what writing the fixture printed
    assert main(["--model-path", str(misfit), "--dump-config"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and lines[0].startswith("serve: error: "), captured.err
    assert "misfit.gguf" in lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_a_q4_k_m_mix_resolves(
    tmp_path: Path, dense: Path, model_cache: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Fused groups of mixed types (a Q8_0 v beside Q5_0 q and k in layer 1) pass every launch check."""
    model = _transformers_model("LlamaForCausalLM", hidden_size=320, intermediate_size=512, tie_word_embeddings=True)
    path, _ = write_tiny_gguf(model, tmp_path / "mix", "Q4_K", types=q4_k_m_types(model))
    assert main(["--model-path", str(path), "--tokenizer-path", str(dense), "--dump-config"]) == 0, (
        capsys.readouterr().err
    )
