"""What a model path names: a Hugging Face checkpoint directory (config.json + safetensors), or a
GGUF checkpoint (a .gguf file, or a directory holding exactly one .gguf and no safetensors), and
its decoder shape and weight reader either way."""

from __future__ import annotations

from pathlib import Path

from runtime_runner.errors import CheckpointError, UnsupportedConfigError
from runtime_runner.loading.arch_config import ArchConfig, read_arch_config
from runtime_runner.loading.checkpoint import CheckpointReader
from runtime_runner.loading.gguf.checkpoint import GgufCheckpoint
from runtime_runner.loading.weight_reader import WeightReader


def gguf_file_of(path: Path) -> Path | None:
    """The GGUF file `path` names (itself, or a directory's only .gguf when it holds no
    safetensors); None for a Hugging Face directory. CheckpointError for a directory of several
    GGUF files and no safetensors, naming them."""
    if path.suffix == ".gguf" and not path.is_dir():
        return path
    if not path.is_dir() or any(path.glob("*.safetensors")):
        return None
    files = sorted(path.glob("*.gguf"))
    if len(files) > 1:
        raise CheckpointError(
            f"{path} holds {len(files)} GGUF files ({', '.join(f.name for f in files)}); accepted: a model "
            "path naming one of them, or a directory holding one"
        )
    return files[0] if files else None


def arch_config_at(path: Path) -> ArchConfig:
    """The decoder shape of the checkpoint at `path`: config.json's, or the GGUF file's metadata."""
    gguf = gguf_file_of(path)
    return read_arch_config(path) if gguf is None else GgufCheckpoint.open(gguf).cfg


def weight_reader_at(path: Path) -> WeightReader:
    """The reader of the checkpoint at `path`: its safetensors, or its GGUF file's tensors."""
    gguf = gguf_file_of(path)
    return CheckpointReader(path) if gguf is None else GgufCheckpoint.open(gguf)


def draft_arch_config(path: Path) -> ArchConfig:
    """The decoder shape of a speculative draft checkpoint, which is read from a Hugging Face
    directory only; UnsupportedConfigError for a GGUF draft."""
    if gguf_file_of(path) is not None:
        raise UnsupportedConfigError(
            f"the draft checkpoint {path} is a GGUF checkpoint, and a draft is read from a Hugging Face "
            "checkpoint directory only; accepted: a directory of config.json + safetensors"
        )
    return read_arch_config(path)
