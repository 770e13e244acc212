"""Handlers that fill the model leaves from the checkpoint the launch serves."""

from __future__ import annotations

from pathlib import Path

from config_bags import context_length_of, context_length_within_model
from runtime_runner import ensure_default_model

from serve.record.resolution import Resolution


def bundled_default_model() -> Path:
    """The bundled default checkpoint, converted once into a cache dir by the runner."""
    return ensure_default_model()


def default_model(res: Resolution) -> None:
    """Serve the bundled default model when no model_path is given."""
    if res.server_args.model_path is None:
        res.declare("default_model", model_path=str(res.default_model()))


def tokenizer_path(res: Resolution) -> None:
    """The tokenizer lives with the model unless the operator named another directory."""
    res.declare("tokenizer_path", tokenizer_path=res.server_args.model_path)


def served_model_name(res: Resolution) -> None:
    """The API names the model after its directory."""
    if res.server_args.model_path is not None:
        res.declare("served_model_name", served_model_name=Path(res.server_args.model_path).name)


def context_length(res: Resolution) -> None:
    """The model's maximum context, which an operator's value may not exceed."""
    model_max_length = res.model.max_position_embeddings
    res.check(context_length_within_model(model_max_length))
    res.declare("context_length", context_length=context_length_of(res.bags().model, model_max_length))
