"""OpenAI's `dimensions` on /v1/embeddings: a shorter embedding, where the served checkpoint
declares Matryoshka sizes (runtime_runner.loading.matryoshka), as the vector's first `dimensions`
values, scaled back to unit length when the model normalizes its embeddings (as vLLM truncates and
then normalizes); a 400 naming the accepted sizes otherwise."""

from __future__ import annotations

import numpy as np

from serve.http.errors import bad_request
from serve.ipc.messages import ModelInfo
from serve.tokenizer.served_name import served_model_name


def _accepted(info: ModelInfo) -> str:
    sizes = info.matryoshka_dimensions
    if sizes is None:
        return "omit dimensions"
    listed = f"1 to {info.embedding_size}" if not sizes else ", ".join(str(n) for n in sizes)
    return f"dimensions of {listed}, or omit it"


def check_dimensions(dimensions: int | None, info: ModelInfo) -> None:
    """A 400 naming the accepted sizes unless `dimensions` is unset or one the checkpoint declares."""
    if dimensions is None:
        return
    sizes = info.matryoshka_dimensions
    if sizes is None:
        raise bad_request(
            f"dimensions = {dimensions}: model {served_model_name()!r} does not declare Matryoshka truncation "
            "(config.json matryoshka_dimensions or is_matryoshka), so a shorter vector would not be its "
            f"embedding; accepted: {_accepted(info)}",
            param="dimensions",
        )
    fits = dimensions in sizes if sizes else 1 <= dimensions <= info.embedding_size
    if not fits:
        raise bad_request(
            f"dimensions = {dimensions} is not a size model {served_model_name()!r} declares; "
            f"accepted: {_accepted(info)}",
            param="dimensions",
        )


def truncated(vector: bytes, dimensions: int | None, normalized: bool) -> bytes:
    """The embedding's float32 bytes cut to its first `dimensions` values (unset, or its whole
    size: as it is), scaled to unit length again when the model's embeddings are (`normalized`);
    the norm in float64, so the result rounds once."""
    if dimensions is None or 4 * dimensions >= len(vector):
        return vector
    head = np.frombuffer(vector, dtype="<f4")[:dimensions]
    if not normalized:
        return head.tobytes()
    wide = head.astype(np.float64)
    norm = float(np.sqrt(np.dot(wide, wide)))
    return (wide / max(norm, 1e-12)).astype("<f4").tobytes()
