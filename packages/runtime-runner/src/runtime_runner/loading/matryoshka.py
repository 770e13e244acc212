"""Which shorter embeddings a checkpoint declares its own (Matryoshka representation learning: a
prefix of the vector, re-normalized, is an embedding too), read from config.json as vLLM reads it:
`matryoshka_dimensions` (the sizes trained) or `is_matryoshka: true` (any size). sentence-
transformers' `truncate_dim` in config_sentence_transformers.json is a user's choice of size for
that model, not a declaration that truncation holds, so it is not read."""

from __future__ import annotations

import json
from pathlib import Path

from runtime_runner.errors import CheckpointError

# Any size from 1 to the embedding's own (`is_matryoshka: true`).
ANY_SIZE: tuple[int, ...] = ()


def matryoshka_dimensions_at(model_path: Path, embedding_size: int) -> tuple[int, ...] | None:
    """The sizes the checkpoint at `model_path` declares (ANY_SIZE for any from 1 to
    `embedding_size`), None where it declares none (or is a GGUF file, which has no config.json);
    CheckpointError naming the key for a declaration that is not a list of sizes within the
    embedding's."""
    file = model_path / "config.json"
    if not file.is_file():
        return None
    try:
        raw = json.loads(file.read_text())
    except (OSError, ValueError):
        return None  # the checkpoint's own readers refuse it, naming the file
    sizes = raw.get("matryoshka_dimensions")
    if sizes is None:
        return ANY_SIZE if raw.get("is_matryoshka") is True else None
    if (
        not isinstance(sizes, list)
        or not sizes
        or not all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= embedding_size for n in sizes)
    ):
        raise CheckpointError(
            f"{file} gives matryoshka_dimensions = {sizes!r}; accepted: a list of sizes from 1 to {embedding_size}"
        )
    return tuple(sorted(set(sizes)))
