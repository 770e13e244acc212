"""What resolution needs to know about a checkpoint, read from its config.json alone (no
torch, no transformers): the longest context and the KV-cache bytes one token takes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from serve.record.errors import ResolutionError

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


class ModelFacts(msgspec.Struct, frozen=True):
    """The sizes of one checkpoint that launch defaults depend on."""

    max_position_embeddings: int
    num_hidden_layers: int
    num_key_value_heads: int
    head_dim: int
    dtype: str

    def kv_bytes_per_token(self, kv_dtype: str, tp_size: int) -> int:
        """Bytes of K and V one token occupies on one tensor-parallel rank, across all layers.
        `kv_dtype` "auto" means the checkpoint's dtype."""
        dtype = self.dtype if kv_dtype == "auto" else kv_dtype
        heads_per_rank = max(1, self.num_key_value_heads // tp_size)
        return 2 * self.num_hidden_layers * heads_per_rank * self.head_dim * DTYPE_BYTES.get(dtype, 2)


def model_facts(model_dir: Path) -> ModelFacts:
    """The facts of the checkpoint in `model_dir`; ResolutionError naming the file and the
    missing key when config.json is absent or incomplete."""
    path = model_dir / "config.json"
    try:
        config: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except OSError:
        raise ResolutionError(f"model_path {model_dir}: no readable config.json; accepted: a checkpoint directory with config.json") from None
    except json.JSONDecodeError as err:
        raise ResolutionError(f"{path}:{err.lineno}: cannot parse JSON: {err.msg}") from None
    text = config.get("text_config")
    if isinstance(text, dict):  # multimodal checkpoints nest the language model's sizes
        config = {**config, **text}
    try:
        heads = int(config["num_attention_heads"])
        head_dim = config.get("head_dim") or int(config["hidden_size"]) // heads
        return ModelFacts(
            max_position_embeddings=int(config["max_position_embeddings"]),
            num_hidden_layers=int(config["num_hidden_layers"]),
            num_key_value_heads=int(config.get("num_key_value_heads") or heads),
            head_dim=int(head_dim),
            dtype=str(config.get("dtype") or config.get("torch_dtype") or "bfloat16"),
        )
    except KeyError as err:
        raise ResolutionError(f"{path}: missing {err.args[0]!r}, needed to size the context and the KV cache") from None
