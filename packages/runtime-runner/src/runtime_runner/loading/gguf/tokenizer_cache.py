"""A GGUF checkpoint's tokenizer as Hugging Face files, written once per file into the model cache.

The tokenizer process loads a tokenizer directory; a GGUF file carries its tokenizer in its
metadata. `ensure_gguf_tokenizer` writes it (tokenizer.write_hf_tokenizer) into
`model_cache_dir()/tokenizers/<stem>-<key>`, the key naming the file by its resolved path, size and
modification time and the writer's version, so an edited or replaced file gets a fresh directory.
As the default model's conversion, it is written into a temporary sibling and renamed into place.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from pathlib import Path

from runtime_runner.loading.default_model import model_cache_dir, move_into_place
from runtime_runner.loading.gguf.tokenizer import write_hf_tokenizer

# Bump whenever write_hf_tokenizer writes other files, so directories written before are written again.
TOKENIZER_VERSION = 1
WRITTEN = ("tokenizer.json", "tokenizer_config.json")


def gguf_tokenizer_dir(gguf: Path) -> Path:
    """Where the tokenizer of the GGUF file `gguf` is (or will be) written."""
    stat = gguf.resolve().stat()
    identity = f"{gguf.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}\0{TOKENIZER_VERSION}"
    return model_cache_dir() / "tokenizers" / f"{gguf.stem}-{hashlib.sha256(identity.encode()).hexdigest()[:16]}"


def ensure_gguf_tokenizer(gguf: Path) -> Path:
    """The directory holding `gguf`'s tokenizer as Hugging Face files, written on first use."""
    target = gguf_tokenizer_dir(gguf)
    if all((target / name).is_file() for name in WRITTEN):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        write_hf_tokenizer(gguf, scratch)
        move_into_place(scratch, target, complete=lambda folder: all((folder / name).is_file() for name in WRITTEN))
    finally:
        if scratch.exists():
            shutil.rmtree(scratch)
    return target
