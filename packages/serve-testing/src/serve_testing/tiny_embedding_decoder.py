"""A tiny random Qwen3 decoder laid out as Qwen3-Embedding ships: config.json naming
Qwen3ForCausalLM, safetensors holding its inner Qwen3Model's tensors (`embed_tokens.weight`,
`layers.0...`: no `model.` prefix, no LM head, the embedding tied), a tokenizer, and
sentence-transformers' modules.json with last-token pooling and Normalize; and, when asked, the
Matryoshka sizes its config.json declares. Built in about a second, for a real server
with --task embed."""

from __future__ import annotations

import importlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from serve_testing.sentence_transformers_files import write_sentence_transformers_config
from serve_testing.tiny_checkpoint import SPECIAL_TOKENS, build_tokenizer

HIDDEN = 64


def build_tiny_embedding_decoder(
    folder: Path, *, max_position_embeddings: int = 256, matryoshka_dimensions: Sequence[int] = (), seed: int = 0
) -> Path:
    """A 2-layer random Qwen3ForCausalLM of HIDDEN features in float32, pooled by its last token and
    normalized as its modules.json says, saved in `folder`; `matryoshka_dimensions`, when given, is
    written into config.json as vLLM reads it."""
    import torch
    from safetensors.torch import load_file, save_file

    transformers: Any = importlib.import_module("transformers")
    folder.mkdir(parents=True, exist_ok=True)
    vocab = build_tokenizer(folder)
    torch.manual_seed(seed)
    config = transformers.Qwen3Config(
        vocab_size=vocab,
        hidden_size=HIDDEN,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=max_position_embeddings,
        initializer_range=0.2,
        tie_word_embeddings=True,
        eos_token_id=SPECIAL_TOKENS.index("<|endoftext|>"),
        dtype="float32",
    )
    transformers.Qwen3ForCausalLM(config).to(torch.float32).save_pretrained(folder)
    weights = load_file(folder / "model.safetensors")
    bare = {name.removeprefix("model."): tensor for name, tensor in weights.items() if name != "lm_head.weight"}
    save_file(bare, folder / "model.safetensors", metadata={"format": "pt"})
    if matryoshka_dimensions:
        raw = json.loads((folder / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**raw, "matryoshka_dimensions": list(matryoshka_dimensions)}))
    write_sentence_transformers_config(folder, HIDDEN, {"pooling_mode_lasttoken": True})
    return folder
