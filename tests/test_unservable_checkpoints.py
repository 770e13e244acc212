"""An unservable Hugging Face checkpoint ends the launch with exit 2 and one line naming the file
and what is wrong, found by the launcher before any process starts: an architecture with no model
code, config.json without weights, a safetensors file truncated or corrupt, a shard its index
names but the directory lacks, a tensor missing or of the wrong shape, a tokenizer that will not
load. Before, each got through resolution and failed in a child process with a 27-37 line
traceback and exit 1.

Each case breaks a copy of a valid tiny checkpoint (serve_testing.tiny_checkpoint) and runs
`serve`'s own entry point in this process with --dump-config, as tests/test_gguf_broken_files.py
does for GGUF files; a tiny BERT checkpoint (serve_testing.tiny_bert_checkpoint) is broken the
same way, and one case runs the real console command in a subprocess on a cut BERT.

Reverse-verified by hand: with the safetensors_fit_their_decoder and tokenizer_loads handlers
taken out of the pipeline, every case resolved and printed its config (exit 0).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

import config_bags
from serve.main import main
from serve_testing.tiny_bert_checkpoint import build_tiny_bert_checkpoint
from serve_testing.tiny_checkpoint import build_tiny_checkpoint

Break = Callable[[Path], None]

WEIGHTS = "model.safetensors"
K_PROJ = "model.layers.1.self_attn.k_proj.weight"


@pytest.fixture(autouse=True)
def _unpublished() -> None:
    config_bags.unpublish()


@pytest.fixture(scope="module")
def valid(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("valid") / "tiny")


def _architecture(name: str) -> Break:
    def patch(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "architectures": [name]}))

    return patch


def _cut_to(fraction: float) -> Break:
    def patch(folder: Path) -> None:
        data = (folder / WEIGHTS).read_bytes()
        (folder / WEIGHTS).write_bytes(data[: int(len(data) * fraction)])

    return patch


def _tensors(change: Callable[[dict[str, torch.Tensor]], None]) -> Break:
    def patch(folder: Path) -> None:
        tensors = load_file(folder / WEIGHTS)
        change(tensors)
        save_file(tensors, folder / WEIGHTS, metadata={"format": "pt"})

    return patch


def _sharded_without_its_shard(folder: Path) -> None:
    (folder / WEIGHTS).rename(folder / "model-00001-of-00002.safetensors")
    weight_map = {
        name: "model-00001-of-00002.safetensors" for name in load_file(folder / "model-00001-of-00002.safetensors")
    }
    weight_map[K_PROJ] = "model-00002-of-00002.safetensors"
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))


# (id, the break of a copy of the valid checkpoint, what the one line must name)
CASES: list[tuple[str, Break, list[str]]] = [
    (
        "an architecture with no model code",
        _architecture("GPT2LMHeadModel"),
        [
            "config.json: architecture 'GPT2LMHeadModel' is not supported",
            "supported: BertForSequenceClassification, BertModel, LlamaForCausalLM",
        ],
    ),
    (
        "config.json and no weights",
        lambda folder: (folder / WEIGHTS).unlink(),
        ["no *.safetensors in", "accepted: model.safetensors or shards"],
    ),
    ("cut in half", _cut_to(0.5), ["model.safetensors is not a readable safetensors file", "truncated or corrupt"]),
    ("cut in its header", _cut_to(0.0001), ["model.safetensors is not a readable safetensors file", "header"]),
    (
        "a shard absent",
        _sharded_without_its_shard,
        ["model-00002-of-00002.safetensors is absent from", "accepted: every file the checkpoint names"],
    ),
    (
        "a shard index that is not JSON",
        lambda folder: (folder / "model.safetensors.index.json").write_text("{"),
        ["model.safetensors.index.json is not a shard index", "'weight_map'"],
    ),
    (
        "a tensor missing",
        _tensors(lambda tensors: tensors.__delitem__(K_PROJ)),
        [f"no safetensors file holds tensor '{K_PROJ}' (shape [32, 64])", "which LlamaForCausalLM reads"],
    ),
    (
        "a tensor of the wrong shape",
        _tensors(lambda tensors: tensors.update({K_PROJ: torch.zeros(16, 64)})),
        [f"model.safetensors: tensor '{K_PROJ}' has shape [16, 64], but config.json implies [32, 64]"],
    ),
    (
        "a tokenizer.json that does not parse",
        lambda folder: (folder / "tokenizer.json").write_text('{"model": '),
        ["tokenizer_path:", "tokenizer.json does not load", "accepted: a fast tokenizer's tokenizer.json"],
    ),
    (
        "no tokenizer",
        lambda folder: (folder / "tokenizer.json").unlink(),
        ["tokenizer_path:", "holds no tokenizer", "accepted: a directory holding one of tokenizer.json"],
    ),
    (
        "a tokenizer_config.json that is not JSON",
        lambda folder: (folder / "tokenizer_config.json").write_text("{,"),
        ["tokenizer_config.json is not valid JSON"],
    ),
]


@pytest.mark.parametrize(("patch", "needles"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_an_unservable_checkpoint_exits_2_with_one_line_naming_it(
    patch: Break, needles: list[str], valid: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = shutil.copytree(valid, tmp_path / "broken")
    patch(broken)
    assert main(["--model-path", str(broken), "--dump-config"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and lines[0].startswith("serve: error: "), captured.err
    assert str(broken) in lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.fixture(scope="module")
def valid_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_bert_checkpoint(tmp_path_factory.mktemp("bert") / "tiny-bert")


BERT_CASES: list[tuple[str, Break, list[str]]] = [
    (
        "a layer's tensor missing",
        _tensors(lambda tensors: tensors.__delitem__("encoder.layer.1.output.dense.bias")),
        [
            "no safetensors file holds tensor 'encoder.layer.1.output.dense.bias' (shape [64])",
            "which BertEncoder reads",
        ],
    ),
    (
        "positions short of config.json",
        _tensors(lambda tensors: tensors.update({"embeddings.position_embeddings.weight": torch.zeros(64, 64)})),
        ["tensor 'embeddings.position_embeddings.weight' has shape [64, 64], but config.json implies [128, 64]"],
    ),
    (
        "a pooling module not computed",
        lambda folder: (folder / "modules.json").write_text(
            '[{"path": "2_Dense", "type": "sentence_transformers.models.Dense"}]'
        ),
        ["modules.json lists module 'sentence_transformers.models.Dense'", "accepted: sentence-transformers'"],
    ),
]


@pytest.mark.parametrize(("patch", "needles"), [c[1:] for c in BERT_CASES], ids=[c[0] for c in BERT_CASES])
def test_an_unservable_bert_checkpoint_exits_2_with_one_line_naming_it(
    patch: Break, needles: list[str], valid_bert: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reverse-verified by hand: without the encoder's tensors in safetensors_fit, the first two
    resolved (and would have failed in the loading child)."""
    broken = shutil.copytree(valid_bert, tmp_path / "broken")
    patch(broken)
    assert main(["--model-path", str(broken), "--dump-config"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and lines[0].startswith("serve: error: "), captured.err
    for needle in needles:
        assert needle in lines[0], lines[0]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--dtype", "float16"], "task = 'embed' runs the encoder in float32 or bfloat16, and dtype = 'float16'"),
        (["--device", "cuda"], "task = 'embed' runs the encoder on the CPU, and device = 'cuda'"),
        (["--tp-size", "2"], "task = 'embed' runs the encoder in one process, and tp_size = 2"),
        (["--task", "generate"], "task = 'generate': BertModel is an encoder without a classifier: it embeds"),
    ],
    ids=["float16", "cuda", "tensor parallel", "generate"],
)
def test_an_encoder_launch_this_build_does_not_run_is_refused_in_one_line(
    argv: list[str], needle: str, valid_bert: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reverse-verified by hand: without the dtype check the float16 launch resolved (exit 0), and
    its scheduler process would have raised ValueError loading the encoder."""
    assert main(["--model-path", str(valid_bert), *argv, "--dump-config"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], lines


def test_the_console_command_refuses_a_cut_bert_checkpoint_in_one_line(valid_bert: Path, tmp_path: Path) -> None:
    """The issue's report: `serve --model` at all-MiniLM-L6-v2 with its model.safetensors cut in
    half gave a 27-37 line traceback from the scheduler process and exit 1. The real command,
    without --dump-config: refused at resolution, before any child starts."""
    bert = shutil.copytree(valid_bert, tmp_path / "bert")
    _cut_to(0.5)(bert)
    result = subprocess.run(
        [sys.executable, "-m", "serve.main", "--model", str(bert), "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert "model.safetensors is not a readable safetensors file" in lines[0], lines[0]
    assert "loading" not in result.stdout
