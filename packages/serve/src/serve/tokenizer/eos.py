"""The tokens that end a generation: the tokenizer's EOS and the checkpoint's generation config's."""

from __future__ import annotations

import json
import os
from typing import Any

from config_bags.server import get_model


def eos_token_ids(tokenizer: Any) -> tuple[int, ...]:
    """Every EOS id the tokenizer or `generation_config.json` of the served model declares."""
    found: list[int] = []
    if tokenizer.eos_token_id is not None:
        found.append(int(tokenizer.eos_token_id))
    model_path = get_model().model_path
    config_file = os.path.join(model_path, "generation_config.json") if model_path else ""
    if config_file and os.path.exists(config_file):
        with open(config_file) as f:
            declared = json.load(f).get("eos_token_id")
        found.extend([declared] if isinstance(declared, int) else list(declared or []))
    return tuple(dict.fromkeys(found))
