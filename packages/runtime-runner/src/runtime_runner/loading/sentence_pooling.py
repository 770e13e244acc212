"""How a checkpoint's embeddings are pooled and normalized, as its sentence-transformers config
says: modules.json lists the modules in order (Transformer, Pooling, Normalize), and the Pooling
module's folder (1_Pooling/config.json) names its mode."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from runtime_runner.errors import CheckpointError, UnsupportedConfigError

PoolingMode = Literal["mean", "cls", "last"]
POOLING_MODES: tuple[PoolingMode, ...] = ("mean", "cls", "last")

# sentence-transformers' flag for each mode computed here.
_MODE_OF_FLAG: dict[str, PoolingMode] = {
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_cls_token": "cls",
    "pooling_mode_lasttoken": "last",
}
_MODULE_TYPES = ("Transformer", "Pooling", "Normalize")


@dataclass(frozen=True)
class PoolingSpec:
    """The pooling of a sequence's last hidden rows into one vector, and whether it is scaled to unit length."""

    mode: PoolingMode
    normalize: bool


# A checkpoint without a sentence-transformers config: its first token's row ([CLS] for BERT),
# normalized, as vLLM and llama-server embed such a BERT by default.
UNCONFIGURED = PoolingSpec(mode="cls", normalize=True)
# A decoder without one: its last token's row (the only one that saw every token through causal
# attention), normalized, as Qwen3-Embedding's config says and vLLM embeds a decoder by default.
DECODER_UNCONFIGURED = PoolingSpec(mode="last", normalize=True)


def _module_type(entry: dict[str, Any], file: Path) -> str:
    kind = str(entry.get("type", "")).rsplit(".", 1)[-1]
    if kind not in _MODULE_TYPES:
        raise UnsupportedConfigError(
            f"{file} lists module {entry.get('type')!r}; accepted: sentence-transformers' "
            f"{', '.join(_MODULE_TYPES)} modules"
        )
    return kind


def _mode_of(file: Path) -> PoolingMode:
    try:
        raw = json.loads(file.read_text())
    except (OSError, ValueError) as err:
        raise CheckpointError(
            f"{file} does not read as JSON ({err}); accepted: a sentence-transformers Pooling config"
        ) from None
    on = [flag for flag, value in raw.items() if flag.startswith("pooling_mode_") and value is True]
    if len(on) != 1 or on[0] not in _MODE_OF_FLAG:
        raise UnsupportedConfigError(
            f"{file} turns on {on or 'no pooling mode'}; accepted: exactly one of {', '.join(_MODE_OF_FLAG)}"
        )
    return _MODE_OF_FLAG[on[0]]


def pooling_spec_at(model_dir: Path, unconfigured: PoolingSpec = UNCONFIGURED) -> PoolingSpec:
    """The checkpoint's pooling: from modules.json and its Pooling module's config, or
    `unconfigured` where the checkpoint has no modules.json (a decoder's is DECODER_UNCONFIGURED).
    A module this encoder does not compute (Dense, ...) or a pooling mode it lacks raises naming
    the file."""
    modules_file = model_dir / "modules.json"
    if not modules_file.is_file():
        return unconfigured
    try:
        modules = json.loads(modules_file.read_text())
    except ValueError as err:
        raise CheckpointError(f"{modules_file} is not valid JSON ({err})") from None
    kinds = {_module_type(entry, modules_file): entry for entry in modules}
    pooling = kinds.get("Pooling")
    mode = unconfigured.mode if pooling is None else _mode_of(model_dir / str(pooling["path"]) / "config.json")
    return PoolingSpec(mode=mode, normalize="Normalize" in kinds)
