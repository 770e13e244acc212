"""Which files a census reads (every `*.py` under the given paths, skipping virtual
environments, caches and version-control folders), and how: as UTF-8, with or without a
byte-order mark."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

SKIPPED_DIRS = frozenset(
    {".git", ".hg", ".svn", ".venv", "venv", "__pycache__", "node_modules", ".mypy_cache", ".tox", "build", "dist"}
)


def python_files(paths: Sequence[Path], exclude: Sequence[Path] = ()) -> Iterator[Path]:
    """Every Python file under `paths` (a file path is taken as it is), in sorted order, except
    those under `exclude`."""
    left_out = {e.resolve() for e in exclude}
    for path in paths:
        if path.resolve() in left_out:
            continue
        if path.is_file():
            yield path
            continue
        if not path.is_dir():
            raise FileNotFoundError(f"census: no such file or directory: {path}")
        for root, dirs, files in os.walk(path):
            here = Path(root)
            dirs[:] = sorted(
                d
                for d in dirs
                if d not in SKIPPED_DIRS and not d.endswith(".egg-info") and (here / d).resolve() not in left_out
            )
            for name in sorted(files):
                if name.endswith((".py", ".pyi")) and (here / name).resolve() not in left_out:
                    yield here / name


def source_text(path: Path) -> str:
    """The text of `path` as UTF-8; a leading byte-order mark is dropped (editors on Windows
    write one, and `ast.parse` refuses it in a str). Raises OSError or UnicodeDecodeError."""
    return path.read_text(encoding="utf-8-sig")
