"""Which classes of a scanned tree inherit a parked record: a base class that parks it
(`self._server_args = server_args` in `__init__`) hands the attribute down to every subclass,
in the same module or in another module of the tree, through any number of levels.

A base is resolved from how the subclass's module spells it: a class of that module
(`class S(Base)`), or a name bound by an import (`from pkg.base import Base`,
`import pkg.base as b` then `b.Base`, `from .base import Base`, `from .. import base` then
`base.Base`), also through a package that re-exports it (`from pkg import Base`). An absolute
module is found by the end of its path (`pkg/base.py`, `pkg/base/__init__.py`), the nearest to
the importing file when several match; a relative one from the importing file's folder. A base
outside the tree, or spelled any other way (a call, a name bound by assignment), hands nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePosixPath

from census.findings import ClassFacts

MAX_REEXPORTS = 8
NOTHING: frozenset[str] = frozenset()

ClassKey = tuple[str, str]  # (module key, class qualname)


@dataclass(frozen=True)
class ModuleFacts:
    """What the graph knows of one module: where it lies, its classes and its imports."""

    location: PurePosixPath
    classes: Mapping[str, ClassFacts]
    imports: Mapping[str, tuple[int, str]]


def _module_parts(location: PurePosixPath) -> tuple[str, ...]:
    """`a/b/c.py` -> (a, b, c); `a/b/__init__.py` -> (a, b)."""
    stem = location.name.rsplit(".", 1)[0]
    parent = location.parent.parts
    return parent if stem == "__init__" else (*parent, stem)


class ClassGraph:
    """The classes of a tree's modules, keyed by module key (the reported path)."""

    def __init__(self, modules: Mapping[str, ModuleFacts]) -> None:
        self.modules = modules
        self._by_parts: dict[tuple[str, ...], list[str]] = {}
        self._by_last: dict[str, list[str]] = {}
        for key in sorted(modules):
            parts = _module_parts(modules[key].location)
            self._by_parts.setdefault(parts, []).append(key)
            if parts:
                self._by_last.setdefault(parts[-1], []).append(key)

    def inherited(self) -> dict[str, dict[str, frozenset[str]]]:
        """Per module key, per class qualname: the parked attributes its bases hand down
        (classes that inherit none are absent)."""
        found: dict[str, dict[str, frozenset[str]]] = {}
        for key, module in self.modules.items():
            for qualname in module.classes:
                handed = self._handed_down((key, qualname), set())
                if handed:
                    found.setdefault(key, {})[qualname] = handed
        return found

    def carrying(self) -> frozenset[str]:
        """The names of every class whose instances carry a parked record (its own or
        inherited): a module that spells none of them cannot subclass one."""
        names = set()
        for key, module in self.modules.items():
            for qualname in module.classes:
                if self._carried_by((key, qualname), set()):
                    names.add(qualname.rpartition(".")[2])
        return frozenset(names)

    def _carried_by(self, cls: ClassKey, visiting: set[ClassKey]) -> frozenset[str]:
        return self.modules[cls[0]].classes[cls[1]].parked | self._handed_down(cls, visiting)

    def _handed_down(self, cls: ClassKey, visiting: set[ClassKey]) -> frozenset[str]:
        if cls in visiting:  # only a mis-resolved name makes a cycle; it hands nothing
            return NOTHING
        visiting.add(cls)
        handed: frozenset[str] = NOTHING
        for base in self.modules[cls[0]].classes[cls[1]].bases:
            resolved = self.resolve(cls[0], base, cls[1])
            if resolved is not None:
                handed |= self._carried_by(resolved, visiting)
        visiting.discard(cls)
        return handed

    # -- resolving a base as the subclass's module spells it

    def resolve(self, key: str, dotted: str, within: str = "", depth: int = 0) -> ClassKey | None:
        """The class `dotted` names in module `key`, seen from the class `within` (so that a
        class nested in a function finds its siblings), or None when it is not in the tree."""
        module = self.modules[key]
        scopes = within.split(".")[:-1]
        for cut in range(len(scopes), -1, -1):
            qualname = ".".join([*scopes[:cut], dotted])
            # `class Base(Base)` subclasses the Base bound before it (an import), not itself
            if qualname in module.classes and qualname != within:
                return (key, qualname)
        head, _, rest = dotted.partition(".")
        if head not in module.imports or depth > MAX_REEXPORTS:
            return None
        level, target = module.imports[head]
        parts = [*target.split("."), *rest.split(".")] if rest else target.split(".")
        return self._in_modules(key, level, parts, depth)

    def _in_modules(self, importer: str, level: int, parts: list[str], depth: int) -> ClassKey | None:
        """The class `parts` names: the longest leading run that is a module of the tree,
        then a class of that module (or a name it imports: a re-export)."""
        for cut in range(len(parts) - 1, -1 if level else 0, -1):
            module = self._module(importer, level, tuple(parts[:cut]))
            if module is None:
                continue
            rest = ".".join(parts[cut:])
            if rest in self.modules[module].classes:
                return (module, rest)
            return self.resolve(module, rest, "", depth + 1)
        return None

    def _module(self, importer: str, level: int, parts: tuple[str, ...]) -> str | None:
        """The key of the module `parts` names from `importer` (`level` dots before it)."""
        location = self.modules[importer].location
        if level:
            folder = location.parents[level - 1] if level - 1 < len(location.parents) else None
            if folder is None:
                return None
            found = self._by_parts.get((*folder.parts, *parts))
            return found[0] if found else None
        candidates = [
            k
            for k in self._by_last.get(parts[-1], [])
            if _module_parts(self.modules[k].location)[-len(parts) :] == parts
        ]
        if not candidates:
            return None
        return max(candidates, key=lambda k: _shared_length(self.modules[k].location, location))


def _shared_length(a: PurePosixPath, b: PurePosixPath) -> int:
    """How many leading folders two paths share."""
    n = 0
    for x, y in zip(a.parts, b.parts, strict=False):
        if x != y:
            break
        n += 1
    return n
