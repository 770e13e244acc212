"""Running the census over files: read, parse (3.8-3.13), scan each module, collect."""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from census.findings import DynamicRead, Read, Taker, Write
from census.module_scan import ModuleScanner, RecordNames
from census.parsing import UnparseableWarning, parsed_module
from census.sources import python_files


@dataclass
class Census:
    """The census of a set of files."""

    files: int = 0
    skipped: list[str] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    dynamic: list[DynamicRead] = field(default_factory=list)
    takers: list[Taker] = field(default_factory=list)


def display_path(path: Path, root: Path | None) -> str:
    """`path` relative to `root` when inside it, with forward slashes."""
    if root is not None:
        try:
            path = path.resolve().relative_to(root.resolve())
        except ValueError:
            pass
    return path.as_posix()


def mentions_record(source: str, names: RecordNames) -> bool:
    """Whether `source` spells any record name or record type. Every shape the census follows
    starts from one of them, so a file that spells none holds no finding."""
    return any(name in source for name in names.names) or any(name in source for name in names.types)


def census_of_source(source: str, path: str, names: RecordNames, bag_of: Mapping[str, str], *, prefilter: bool = True) -> Census:
    """The census of one module's source text (unparseable: skipped, with a warning). With
    `prefilter`, a file that never spells the record is not parsed: it cannot hold a finding."""
    result = Census(files=1)
    if prefilter and not mentions_record(source, names):
        return result
    tree = parsed_module(source, path)
    if tree is None:
        result.skipped.append(path)
        return result
    found = ModuleScanner(path, names, bag_of).scan(tree)
    result.reads, result.writes, result.dynamic, result.takers = found.reads, found.writes, found.dynamic, found.takers
    return result


def census_of(
    paths: Sequence[Path],
    names: RecordNames = RecordNames(),
    bag_of: Mapping[str, str] | None = None,
    root: Path | None = None,
    exclude: Sequence[Path] = (),
) -> Census:
    """The census of every Python file under `paths` but not under `exclude`; reported paths are
    relative to `root` (default: the current directory)."""
    root = Path(os.getcwd()) if root is None else root
    total = Census()
    for file in python_files(paths, exclude):
        shown = display_path(file, root)
        try:
            source = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            warnings.warn(f"{shown}: skipped, cannot read: {err}", UnparseableWarning, stacklevel=2)
            total.files += 1
            total.skipped.append(shown)
            continue
        one = census_of_source(source, shown, names, bag_of or {})
        total.files += 1
        total.skipped += one.skipped
        total.reads += one.reads
        total.writes += one.writes
        total.dynamic += one.dynamic
        total.takers += one.takers
    return total
