"""Running the census over files: read, parse (3.8-3.13), scan each module, hand parked
records down the class graph, collect."""

from __future__ import annotations

import ast
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from census.bag_names import NO_BAGS, BagNames
from census.class_graph import ClassGraph, ModuleFacts
from census.findings import Copy, DynamicRead, ModuleFindings, Parker, Read, Taker, Write
from census.module_scan import ModuleScanner
from census.parsing import UnparseableWarning, parsed_module
from census.record_names import SERVER_ARGS, RecordNames
from census.sources import python_files, source_text

# Each round hands parking one more step down a chain that crosses modules the first scan did
# not parse; real trees settle in two or three.
MAX_GRAPH_ROUNDS = 16


@dataclass
class Census:
    """The census of a set of files."""

    files: int = 0
    skipped: list[str] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    dynamic: list[DynamicRead] = field(default_factory=list)
    takers: list[Taker] = field(default_factory=list)
    parkers: list[Parker] = field(default_factory=list)
    copies: list[Copy] = field(default_factory=list)


@dataclass(frozen=True)
class SourceFile:
    """One module's text: `shown` is the path the census reports, `location` where it lies
    (what relative imports and module names are resolved against)."""

    shown: str
    location: PurePosixPath
    text: str


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


class _TreeScan:
    """The modules of one census: parsed on demand, scanned with what the class graph hands
    down, rescanned when that changes."""

    def __init__(self, names: RecordNames, bag_of: Mapping[str, str], bags: BagNames) -> None:
        self.names, self.bag_of, self.bags = names, bag_of, bags
        self.trees: dict[str, tuple[SourceFile, ast.Module]] = {}
        self.found: dict[str, ModuleFindings] = {}
        self.handed: dict[str, dict[str, frozenset[str]]] = {}
        self.skipped: set[str] = set()

    def add(self, file: SourceFile) -> None:
        tree = parsed_module(file.text, file.shown)
        if tree is None:
            self.skipped.add(file.shown)
            return
        self.trees[file.shown] = (file, tree)
        self.scan(file.shown)

    def scan(self, key: str) -> None:
        file, tree = self.trees[key]
        scanner = ModuleScanner(file.shown, self.names, self.bag_of, self.bags, self.handed.get(key, {}))
        self.found[key] = scanner.scan(tree)

    def graph(self) -> ClassGraph:
        return ClassGraph(
            {
                key: ModuleFacts(file.location, self.found[key].classes, self.found[key].imports)
                for key, (file, _) in self.trees.items()
            }
        )


def census_of_sources(
    files: Sequence[SourceFile],
    names: RecordNames,
    bag_of: Mapping[str, str],
    bags: BagNames = NO_BAGS,
    *,
    prefilter: bool = True,
) -> Census:
    """The census of these modules, as one tree: a record parked by a class in one of them is
    followed into the subclasses in any of them. With `prefilter`, a module that spells neither
    the record nor a bag name, nor a class that carries a parked record, is not parsed: it
    cannot hold a finding."""
    tree = _TreeScan(names, bag_of, bags)
    first, left = _split(
        list(files), lambda text: not prefilter or mentions_record(text, names) or bags.spelled_in(text)
    )
    for file in first:
        tree.add(file)
    for _ in range(MAX_GRAPH_ROUNDS):
        graph = tree.graph()
        carrying = graph.carrying()
        subclassing, left = _split(left, _spells_any(carrying))
        handed = graph.inherited()
        changed = [key for key in tree.trees if handed.get(key, {}) != tree.handed.get(key, {})]
        tree.handed = handed
        for key in changed:
            tree.scan(key)
        for file in subclassing:
            tree.add(file)
        if not changed and not subclassing:
            break
    result = Census(files=len(files))
    for file in files:
        if file.shown in tree.skipped:
            result.skipped.append(file.shown)
        found = tree.found.get(file.shown)
        if found is not None:
            result.reads += found.reads
            result.writes += found.writes
            result.dynamic += found.dynamic
            result.takers += found.takers
            result.parkers += found.parkers
            result.copies += found.copies
    return result


def _spells_any(names: frozenset[str]) -> Callable[[str], bool]:
    """Whether a file's text spells any of `names`."""
    return lambda text: any(name in text for name in names)


def _split(files: list[SourceFile], spells: Callable[[str], bool]) -> tuple[list[SourceFile], list[SourceFile]]:
    """(the files whose text `spells` answers yes for, the others)."""
    yes: list[SourceFile] = []
    no: list[SourceFile] = []
    for file in files:
        (yes if spells(file.text) else no).append(file)
    return yes, no


def census_of_source(
    source: str,
    path: str,
    names: RecordNames,
    bag_of: Mapping[str, str],
    *,
    prefilter: bool = True,
    bags: BagNames = NO_BAGS,
) -> Census:
    """The census of one module's source text (unparseable: skipped, with a warning). With
    `prefilter`, a file that spells neither the record nor a bag name is not parsed: it cannot
    hold a finding."""
    return census_of_sources([SourceFile(path, PurePosixPath(path), source)], names, bag_of, bags, prefilter=prefilter)


def read_sources(
    paths: Sequence[Path], root: Path | None = None, exclude: Sequence[Path] = ()
) -> tuple[list[SourceFile], list[str]]:
    """(the Python files under `paths` but not under `exclude`, read; the reported paths of
    those that cannot be read as UTF-8, each with an UnparseableWarning). Reported paths are
    relative to `root` (default: the current directory)."""
    root = Path(os.getcwd()) if root is None else root
    readable: list[SourceFile] = []
    unreadable: list[str] = []
    for file in python_files(paths, exclude):
        shown = display_path(file, root)
        try:
            readable.append(SourceFile(shown, PurePosixPath(file.resolve().as_posix()), source_text(file)))
        except (OSError, UnicodeDecodeError) as err:
            warnings.warn(f"{shown}: skipped, cannot read: {err}", UnparseableWarning, stacklevel=3)
            unreadable.append(shown)
    return readable, unreadable


def census_of(
    paths: Sequence[Path],
    names: RecordNames = SERVER_ARGS,
    bag_of: Mapping[str, str] | None = None,
    root: Path | None = None,
    exclude: Sequence[Path] = (),
    bags: BagNames = NO_BAGS,
) -> Census:
    """The census of every Python file under `paths` but not under `exclude`, as one tree;
    reported paths are relative to `root` (default: the current directory)."""
    readable, unreadable = read_sources(paths, root, exclude)
    total = census_of_sources(readable, names, bag_of or {}, bags)
    total.files += len(unreadable)
    total.skipped = unreadable + total.skipped
    return total
