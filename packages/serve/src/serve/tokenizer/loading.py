"""Loading the served model's tokenizer, from the published model bag."""

from __future__ import annotations

from typing import Any

from config_bags.server import get_model


def tokenizer_dir() -> str:
    """The folder the tokenizer loads from: tokenizer_path, else model_path."""
    model = get_model()
    path = model.tokenizer_path or model.model_path
    if path is None:
        raise ValueError(
            "no tokenizer: model.model_path is unset; the launcher resolves the default model before starting"
        )
    return path


def load_tokenizer() -> Any:
    """The Hugging Face tokenizer of the served model (a fast tokenizer)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_dir(), trust_remote_code=get_model().trust_remote_code)
