"""A truncated, corrupted or lying GGUF file is refused before anything it states is trusted:
`serve --model FILE` exits 2 with one line naming the file and what is wrong (a count, length,
dim or offset the file's bytes do not bear out, or metadata its own tensors contradict).

Each case patches a valid tiny file (serve_testing.tiny_gguf) at a place found by its bytes (a
tensor's name, a key's name), apart from the reader under test, and runs `serve`'s own entry point
in this process with --dump-config (as tests/test_gguf_launch.py does); one case runs the real
console command in a subprocess. A broken tokenizer is refused by the tokenizer reader directly.
"""

from __future__ import annotations

import importlib
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import pytest
import torch

import config_bags
from runtime_runner.errors import CheckpointError
from runtime_runner.loading.gguf.tokenizer import read_gguf_tokenizer
from serve.main import main
from serve_testing.tiny_gguf import write_tiny_gguf

Patch = Callable[[bytearray], bytes]


@pytest.fixture(autouse=True)
def _unpublished() -> None:
    config_bags.unpublish()


@pytest.fixture(scope="module")
def valid(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A tiny Llama GGUF's bytes (Q8_0 matrices, F32 norms), which serve resolves."""
    transformers: Any = importlib.import_module("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=64,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
    )
    path, _ = write_tiny_gguf(transformers.LlamaForCausalLM(config), tmp_path_factory.mktemp("valid"), "Q8_0")
    return path.read_bytes()


def _tensor_info_at(data: bytearray, name: str) -> tuple[int, int]:
    """Where tensor `name`'s dims start in the header, and how many it has (found by its name's bytes)."""
    encoded = name.encode()
    at = data.index(struct.pack("<Q", len(encoded)) + encoded) + 8 + len(encoded)
    return at + 4, struct.unpack_from("<I", data, at)[0]


def _offset_at(data: bytearray, name: str) -> int:
    """Where tensor `name`'s data offset is in the header."""
    dims_at, n_dims = _tensor_info_at(data, name)
    return dims_at + 8 * n_dims + 4


def _value_at(data: bytearray, key: str) -> int:
    """Where metadata `key`'s scalar value is in the header."""
    encoded = key.encode()
    return data.index(struct.pack("<Q", len(encoded)) + encoded) + 8 + len(encoded) + 4


def _put(data: bytearray, at: int, code: str, value: int) -> bytes:
    struct.pack_into(code if code[0] in "<>" else "<" + code, data, at, value)
    return bytes(data)


def _truncated_data(data: bytearray) -> bytes:
    return bytes(data[:-100])


def _tensor_count(count: int) -> Patch:
    return lambda data: _put(data, 8, "Q", count)


def _one_tensor_more(data: bytearray) -> bytes:
    return _put(data, 8, "Q", struct.unpack_from("<Q", data, 8)[0] + 1)


def _offset_moved(by: int) -> Patch:
    def patch(data: bytearray) -> bytes:
        at = _offset_at(data, "blk.1.ffn_down.weight")
        return _put(data, at, "Q", struct.unpack_from("<Q", data, at)[0] + by)

    return patch


def _overlapping(data: bytearray) -> bytes:
    first = struct.unpack_from("<Q", data, _offset_at(data, "blk.0.attn_q.weight"))[0]
    return _put(data, _offset_at(data, "blk.0.attn_k.weight"), "Q", first)


def _row_length(length: int) -> Patch:
    return lambda data: _put(data, _tensor_info_at(data, "blk.0.attn_q.weight")[0], "Q", length)


def _dim_count(count: int) -> Patch:
    return lambda data: _put(data, _tensor_info_at(data, "blk.0.attn_q.weight")[0] - 4, "I", count)


def _metadata(key: str, value: int) -> Patch:
    return lambda data: _put(data, _value_at(data, key), "I", value)


# (id, the patch of the valid file's bytes, what the one line must name besides the file)
CASES: list[tuple[str, Patch, list[str]]] = [
    ("empty", lambda data: b"", ["is not a readable GGUF file", "cannot mmap an empty file"]),
    ("not gguf", lambda data: b"PK\x03\x04" + bytes(data[4:]), ["does not start with the GGUF magic"]),
    ("big-endian", lambda data: _put(data, 4, ">I", 3), ["(a big-endian file)", "little-endian"]),
    (
        "truncated in the header",
        lambda data: bytes(data[: _offset_at(data, "output.weight") + 4]),
        ["the offset of output.weight at byte", "needs 8 bytes, but the file ends 4 bytes later"],
    ),
    (
        "truncated in the data",
        _truncated_data,
        ["tensor output.weight (Q8_0 [64, 64]", "lies past the end of the", "truncated or corrupt"],
    ),
    ("absurd tensor count", _tensor_count(10**12), ["header claims 1000000000000 tensors", "more than the"]),
    ("one tensor more than held", _one_tensor_more, ["the name of tensor 21 is '', no name", "corrupt"]),
    ("absurd metadata count", lambda data: _put(data, 16, "Q", 2**40), ["1099511627776 metadata entries"]),
    ("absurd key length", lambda data: _put(data, 24, "Q", 2**62), ["metadata key 0 (4611686018427387904 bytes long)"]),
    ("data offset past the end", _offset_moved(2**20), ["blk.1.ffn_down.weight", "lies past the end"]),
    ("misaligned data offset", _offset_moved(1), ["blk.1.ffn_down.weight starts at data offset", "32-byte alignment"]),
    ("overlapping tensors", _overlapping, ["tensors blk.0.attn_q.weight and blk.0.attn_k.weight share bytes"]),
    ("row length off the block", _row_length(48), ["blk.0.attn_q.weight has dims [48, 64]", "Q8_0's block of 32"]),
    ("too many dims", _dim_count(9), ["tensor blk.0.attn_q.weight has 9 dims; accepted: 1 to 4"]),
    (
        "block_count past the layers held",
        _metadata("llama.block_count", 3),
        ["lacks tensor blk.2.attn_norm.weight (and 8 more)", "block_count = 3"],
    ),
    (
        "block_count short of the layers held",
        _metadata("llama.block_count", 1),
        ["tensor blk.1.", "has no place in the decoder its metadata states"],
    ),
    (
        "embedding_length lies",
        _metadata("llama.embedding_length", 128),
        ["tensor token_embd.weight has shape [64, 64], but its metadata", "implies [64, 128]"],
    ),
    ("head_count zero", _metadata("llama.attention.head_count", 0), ["attention.head_count = 0", "at least 1"]),
    (
        "an odd head size",
        lambda data: _metadata("llama.rope.dimension_count", 15)(
            bytearray(_metadata("llama.attention.key_length", 15)(data))
        ),
        ["a head of 15 features", "does not split into the rotary pairs", "accepted: an even head size"],
    ),
]


@pytest.mark.parametrize(("patch", "needles"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_broken_file_exits_2_with_one_line_naming_it(
    patch: Patch, needles: list[str], valid: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reverse-verified by hand, each check removed in turn from loading.gguf.format and
    loading.gguf.agreement (the tiny file has no tokenizer, so a file that passed every check of
    the model was refused only by the tokenizer handler, for lacking one): without the count bound
    the absurd counts were refused later and vaguer (an empty tensor name, a key 2^54 bytes long);
    without the string bound the key ran to the end of the file and the "one line" was 5198 lines
    of its bytes; without the alignment, overlap and row-length checks, and without agreement
    (block_count, embedding_length), those files passed the model's checks; without the dim-count
    bound nine dims were read and the type came from the offset's bytes (type 134217728). An odd head
    size is refused in gguf.arch before agreement (which refuses this patched file's shapes too); a
    Llama file whose shapes agree with an odd head fails the loader's un-interleaving (a view of
    rows // heads // 2 pairs per head), in the loading child."""
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(patch(bytearray(valid)))
    assert main(["--model-path", str(broken), "--dump-config"]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert captured.out == "" and len(lines) == 1 and lines[0].startswith("serve: error: "), captured.err
    assert "broken.gguf" in lines[0]
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_the_console_command_exits_2_with_one_line_for_a_truncated_file(valid: bytes, tmp_path: Path) -> None:
    """The real `serve` process, without --dump-config: refused at resolution, before any child starts."""
    broken = tmp_path / "cut.gguf"
    broken.write_bytes(valid[: len(valid) // 2])
    result = subprocess.run(
        [sys.executable, "-m", "serve.main", "--model", str(broken), "--device", "cpu"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert "cut.gguf" in lines[0] and "lies past the end" in lines[0], lines[0]


def _with_tokenizer(path: Path, **overrides: Any) -> Path:
    """A tensor-less GGUF holding a three-token byte-level BPE tokenizer, `overrides` replacing its fields."""
    fields: dict[str, Any] = {"tokens": ["a", "b", "ab"], "types": [1, 1, 1], "merges": ["a b"], "eos": 2, **overrides}
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_context_length(64)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt2")
    writer.add_token_list(fields["tokens"])
    writer.add_token_types(fields["types"])
    writer.add_token_merges(fields["merges"])
    writer.add_eos_token_id(fields["eos"])
    writer.add_tensor("unused", np.zeros(1, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"eos": 3}, "tokenizer.ggml.eos_token_id = 3; accepted: a token id below the vocabulary's 3 tokens"),
        ({"types": [1, 1]}, "holds 3 tokens and tokenizer.ggml.token_type 2 types"),
        ({"merges": ["ab"]}, "tokenizer.ggml.merges holds 'ab'; accepted: merges of two tokens"),
    ],
    ids=["eos past the vocabulary", "types short", "a merge of one token"],
)
def test_a_tokenizer_that_does_not_fit_together_is_refused_naming_the_key(
    overrides: dict[str, Any], needle: str, tmp_path: Path
) -> None:
    """Reverse-verified: without the three checks none was refused here; writing the tokenizer then
    raised IndexError (the EOS), wrote a tokenizer of two token types for three tokens, and raised
    "not enough values to unpack" (the merge), none naming the key."""
    read_gguf_tokenizer(_with_tokenizer(tmp_path / "fine.gguf"))
    with pytest.raises(CheckpointError, match="broken.gguf: ") as refused:
        read_gguf_tokenizer(_with_tokenizer(tmp_path / "broken.gguf", **overrides))
    assert needle in str(refused.value)
