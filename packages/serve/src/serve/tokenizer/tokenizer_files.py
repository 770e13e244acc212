"""Whether a tokenizer directory holds a tokenizer that loads, checked by the launcher before any
process starts: the tokenizer worker would otherwise fail in its child with a traceback."""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer

# The files a Hugging Face tokenizer is built from: the fast tokenizer's own file, or the
# vocabularies a slow tokenizer converts (SentencePiece, byte-level BPE, WordPiece).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt")


def tokenizer_refusal_of(folder: Path, *, custom_code: bool) -> str | None:
    """Why the tokenizer in `folder` would not load, naming the file; None when it would (as far as
    can be told without building it). `custom_code` (trust_remote_code) may read files of its own,
    so their absence is not refused."""
    if not folder.is_dir():
        return f"{folder} is not a directory; accepted: a directory holding a Hugging Face tokenizer"
    config = folder / "tokenizer_config.json"
    if config.is_file():
        try:
            json.loads(config.read_text())
        except ValueError as err:
            return f"{config} is not valid JSON ({err})"
    fast = folder / "tokenizer.json"
    if fast.is_file():
        try:
            Tokenizer.from_file(str(fast))
        except Exception as err:  # noqa: BLE001 (the Rust library raises a bare Exception for every fault)
            return f"{fast} does not load ({' '.join(str(err).split())}); accepted: a fast tokenizer's tokenizer.json"
        return None
    if custom_code or any((folder / name).is_file() for name in TOKENIZER_FILES):
        return None
    return f"{folder} holds no tokenizer; accepted: a directory holding one of {', '.join(TOKENIZER_FILES)}"
