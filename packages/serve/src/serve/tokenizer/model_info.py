"""What the front end knows about the served model once the scheduler is up."""

from __future__ import annotations

import os

import msgspec
from config_bags import get_model


class ModelInfo(msgspec.Struct, frozen=True, kw_only=True):
    """Limits the scheduler reports when ready (its runner measured them)."""

    context_length: int  # longest prompt plus completion, tokens
    max_total_tokens: int  # KV-cache token slots
    vocab_size: int


def served_model_name() -> str:
    """The name the API reports and accepts: served_model_name, else the model folder's name."""
    model = get_model()
    if model.served_model_name is not None:
        return model.served_model_name
    if model.model_path is None:
        raise ValueError("model.model_path is unset; the launcher resolves the default model before serving")
    return os.path.basename(os.path.normpath(model.model_path))
