"""Which tasks a decoder checkpoint launches with, resolved as `serve --dump-config` resolves them
(no process starts): generate unless --task embed (or SGLang's --is-embedding) asks for embeddings,
--pooling then allowed;
rerank refused naming the accepted tasks, as are a Gated-DeltaNet hybrid's embeddings and a
decoder embedding this build does not run (float16, CUDA), and a Matryoshka declaration that is
not a list of sizes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from serve.main import main
from serve_testing.tiny_checkpoint import build_tiny_checkpoint
from serve_testing.tiny_hybrid_checkpoint import build_tiny_hybrid_checkpoint


@pytest.fixture(scope="module")
def decoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("llama") / "tiny-llama", max_position_embeddings=256)


def _resolved(argv: list[str], capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    assert main([*argv, "--dump-config"]) == 0
    leaves = json.loads(capsys.readouterr().out)["leaves"]
    return {name: leaves[name]["value"] for name in ("task", "pooling")}


def test_a_decoder_generates_unless_asked_to_embed(decoder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _resolved(["--model-path", str(decoder)], capsys) == {"task": "generate", "pooling": None}
    asked = ["--model-path", str(decoder), "--task", "embed", "--pooling", "mean"]
    assert _resolved(asked, capsys) == {"task": "embed", "pooling": "mean"}


def test_sglangs_is_embedding_is_task_embed(decoder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _resolved(["--model-path", str(decoder), "--is-embedding"], capsys) == {"task": "embed", "pooling": None}
    assert main(["--model-path", str(decoder), "--is-embedding", "--task", "generate", "--dump-config"]) == 2
    assert "argument --task: not allowed with argument --is-embedding" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--task", "rerank"], "task = 'rerank': LlamaForCausalLM is a decoder: it generates, or embeds with task"),
        (["--task", "embed", "--dtype", "float16"], "runs the decoder's embeddings in float32 or bfloat16"),
        (["--task", "embed", "--device", "cuda"], "runs the decoder's embeddings on the CPU"),
        (["--pooling", "last"], "pooling = 'last' configures embeddings, and task = 'generate'"),
    ],
    ids=["rerank", "float16", "cuda", "pooling without embed"],
)
def test_a_decoder_task_this_build_does_not_run_is_refused_in_one_line(
    decoder: Path, argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--model-path", str(decoder), *argv, "--dump-config"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], lines


def test_a_hybrids_embeddings_are_refused_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Reverse-verified by hand: without the hybrid check in task_served the launch resolved (exit
    0), and its scheduler process would have raised loading the decoder's embeddings."""
    hybrid = build_tiny_hybrid_checkpoint(tmp_path / "hybrid", family="qwen3_next")
    capsys.readouterr()  # the builder's progress bars
    assert main(["--model-path", str(hybrid), "--task", "embed", "--dump-config"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "Qwen3NextForCausalLM is a Gated-DeltaNet hybrid" in lines[0], lines


def test_a_matryoshka_declaration_that_is_not_sizes_is_refused_in_one_line(
    decoder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reverse-verified by hand: without the read in the task handler the launch resolved (exit 0)."""
    broken = shutil.copytree(decoder, tmp_path / "broken")
    config = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**config, "matryoshka_dimensions": [32, 4096]}))
    assert main(["--model-path", str(broken), "--task", "embed", "--dump-config"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "matryoshka_dimensions = [32, 4096]; accepted: a list of sizes from 1 to 64" in lines[0]
