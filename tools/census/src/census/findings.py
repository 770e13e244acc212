"""What the census finds: reads, writes, dynamic reads (the blind spot) and record takers."""

from __future__ import annotations

from typing import Literal

from dataclasses import dataclass, field

Shape = Literal["direct", "alias", "getattr", "parked"]
SHAPES: tuple[Shape, ...] = ("direct", "alias", "getattr", "parked")


@dataclass(frozen=True, slots=True)
class Read:
    """One read of a record member, and how the code reached the record."""

    path: str
    line: int
    function: str
    leaf: str
    bag: str | None
    shape: Shape


@dataclass(frozen=True, slots=True)
class Write:
    """One assignment (or deletion, or setattr with a literal name) to a record member."""

    path: str
    line: int
    function: str
    leaf: str
    bag: str | None


@dataclass(frozen=True, slots=True)
class DynamicRead:
    """A read whose member the census cannot name: getattr/setattr/hasattr with a computed
    name, vars(), __dict__, asdict(). Reported, never dropped."""

    path: str
    line: int
    function: str
    kind: str
    expr: str


@dataclass(frozen=True, slots=True)
class Taker:
    """A function that takes a record instance as a parameter (the disposition table's rows)."""

    path: str
    line: int
    function: str
    parameter: str


@dataclass(slots=True)
class ModuleFindings:
    """Everything found in one module."""

    reads: list[Read] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    dynamic: list[DynamicRead] = field(default_factory=list)
    takers: list[Taker] = field(default_factory=list)
