"""sentence-transformers' files beside a checkpoint: modules.json (Transformer, Pooling, Normalize)
and the Pooling module's 1_Pooling/config.json, as the embedding checkpoints on the Hub ship them."""

from __future__ import annotations

import json
from pathlib import Path


def write_sentence_transformers_config(folder: Path, dimension: int, pooling_flags: dict[str, bool]) -> None:
    """Write modules.json (Transformer, Pooling, Normalize) and 1_Pooling/config.json with
    `pooling_flags` (pooling_mode_mean_tokens, pooling_mode_lasttoken, ...) into `folder`."""
    modules = [
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
        {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"},
    ]
    (folder / "modules.json").write_text(json.dumps(modules))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps({"word_embedding_dimension": dimension, **pooling_flags})
    )
