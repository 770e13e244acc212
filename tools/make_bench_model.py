"""The benchmark model of the size people run on CPUs: a Llama of Llama-3.2-1B's shape (hidden 2048,
16 layers, 32 heads, 8 KV heads, MLP 8192, tied embedding) with random weights and the default
model's vocabulary and tokenizer, as a bf16 Hugging Face checkpoint and as the GGUF files a llama.cpp
user makes of it: llama.cpp's own converter writes the bf16 GGUF, its `llama-quantize` the rest.

    uv run python tools/make_bench_model.py                  # write what is missing, print the paths
    uv run python tools/make_bench_model.py --kinds Q4_K_M   # only these quantized files

Random weights decode exactly as fast as trained ones: a decode step reads every weight once
whatever its values. Everything lives under $XDG_CACHE_HOME/serve-bench/bench-1b (else
~/.cache/serve-bench/bench-1b); llama.cpp is built first by tools/llama_cpp_peer.py when missing.

    hf/                        config.json, model.safetensors (bf16), the tokenizer files
    bench-1b.bf16.gguf         convert_hf_to_gguf.py --outtype bf16
    bench-1b.bf16.KIND.gguf    llama-quantize bench-1b.bf16.gguf ... KIND, for each --kinds
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import time
from pathlib import Path
from typing import Any

import llama_cpp_peer  # run as a script, its sibling tools import by name
import torch

NAME = "bench-1b"
KINDS = ("Q8_0", "Q4_0", "Q4_K_M")
SHAPE: dict[str, Any] = {
    "hidden_size": 2048,
    "num_hidden_layers": 16,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 64,
    "intermediate_size": 8192,
    "max_position_embeddings": 8192,
    "rope_theta": 500000.0,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": True,
}
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")
INIT_STD = 0.02  # Llama's own initializer range


def bench_dir() -> Path:
    """Where the benchmark model's files live."""
    return llama_cpp_peer.cache_root() / NAME


def write_checkpoint(target: Path, seed: int = 0) -> None:
    """The random-weight checkpoint, bf16, written to `target` (replacing what it holds)."""
    from safetensors.torch import save_file
    from transformers import LlamaConfig

    model_class: Any = importlib.import_module("transformers").LlamaForCausalLM  # its stubs leave it untyped

    from runtime_runner.loading.default_model import ensure_default_model, move_into_place

    source = ensure_default_model()
    base = json.loads((source / "config.json").read_text(encoding="utf-8"))
    config = LlamaConfig(
        vocab_size=base["vocab_size"],
        bos_token_id=base.get("bos_token_id"),
        eos_token_id=base.get("eos_token_id"),
        pad_token_id=base.get("pad_token_id"),
        dtype="bfloat16",
        architectures=["LlamaForCausalLM"],  # what converters and loaders pick the model class by
        **SHAPE,
    )
    with torch.device("meta"):
        names = {name: tuple(p.shape) for name, p in model_class(config).state_dict().items()}
    names.pop("lm_head.weight")  # tied to the embedding
    generator = torch.Generator().manual_seed(seed)
    weights = {
        name: torch.ones(shape, dtype=torch.bfloat16)
        if name.endswith("norm.weight")
        else (torch.randn(shape, generator=generator) * INIT_STD).to(torch.bfloat16)
        for name, shape in names.items()
    }
    scratch = target.with_name(f".{target.name}.partial")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    config.save_pretrained(scratch)
    save_file(weights, str(scratch / "model.safetensors"), metadata={"format": "pt"})
    for file in TOKENIZER_FILES:
        if (source / file).is_file():
            shutil.copy2(source / file, scratch / file)
    move_into_place(scratch, target, complete=lambda folder: (folder / "model.safetensors").is_file())


def ensure_bench_files(kinds: tuple[str, ...] = KINDS) -> dict[str, Path]:
    """The benchmark model's files, written when missing: "hf" (the checkpoint's directory), "bf16"
    (llama.cpp's conversion) and one per quantized kind."""
    root = bench_dir()
    root.mkdir(parents=True, exist_ok=True)
    files = {"hf": root / "hf", "bf16": root / f"{NAME}.bf16.gguf"}
    if not files["hf"].is_dir():
        started = time.perf_counter()
        write_checkpoint(files["hf"])
        print(f"make_bench_model: wrote {files['hf']} in {time.perf_counter() - started:.0f} s", flush=True)
    if not files["bf16"].is_file():
        started = time.perf_counter()
        llama_cpp_peer.convert_checkpoint(files["hf"], files["bf16"])
        print(f"make_bench_model: converted {files['bf16']} in {time.perf_counter() - started:.0f} s", flush=True)
    for kind in kinds:
        files[kind] = llama_cpp_peer.ensure_quantized_gguf(files["bf16"], kind)
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kinds", nargs="*", default=list(KINDS), help=f"llama-quantize kinds (default {KINDS})")
    args = parser.parse_args()
    for name, path in ensure_bench_files(tuple(args.kinds)).items():
        size = sum(f.stat().st_size for f in path.rglob("*")) if path.is_dir() else path.stat().st_size
        print(f"{name:>8}: {path} ({size / 1e9:.2f} GB)")


if __name__ == "__main__":
    main()
