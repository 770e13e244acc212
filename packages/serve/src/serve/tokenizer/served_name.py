"""The name the API serves the model under."""

from __future__ import annotations

import os

from config_bags.server import get_model


def served_model_name() -> str:
    """The name the API reports and accepts: served_model_name, else the model folder's name."""
    model = get_model()
    if model.served_model_name is not None:
        return model.served_model_name
    if model.model_path is None:
        raise ValueError("model.model_path is unset; the launcher resolves the default model before serving")
    return os.path.basename(os.path.normpath(model.model_path))
