"""The record's exposure: the functions that take it as a parameter and the classes that park it
on their instances. Each is a place that holds the record itself rather than the values it
needs; outside the composition root a ratchet pins them per file (`census --count exposure`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from census.scan import Census

Kind = Literal["takes", "parks"]


@dataclass(frozen=True, slots=True, order=True)
class Exposure:
    """A function that takes the record (`kind` "takes") or a class that parks it ("parks"),
    by its qualified name, at its first such parameter or parking line."""

    path: str
    line: int
    kind: Kind
    name: str


def exposure(census: Census) -> list[Exposure]:
    """Every function that takes the record and every class that parks it, once each, sorted."""
    first: dict[tuple[str, Kind, str], int] = {}
    places: list[tuple[str, Kind, str, int]] = [(t.path, "takes", t.function, t.line) for t in census.takers]
    places += [(p.path, "parks", p.owner, p.line) for p in census.parkers]
    for path, kind, name, line in places:
        first[path, kind, name] = min(first.get((path, kind, name), line), line)
    return sorted(Exposure(path, line, kind, name) for (path, kind, name), line in first.items())
