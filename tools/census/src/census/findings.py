"""What the census finds: reads, writes, dynamic reads (the blind spot) and record takers."""

from __future__ import annotations

from typing import Literal

import msgspec

Shape = Literal["direct", "alias", "getattr", "parked"]
SHAPES: tuple[Shape, ...] = ("direct", "alias", "getattr", "parked")


class Read(msgspec.Struct, frozen=True):
    """One read of a record member, and how the code reached the record."""

    path: str
    line: int
    function: str
    leaf: str
    bag: str | None
    shape: Shape


class Write(msgspec.Struct, frozen=True):
    """One assignment (or deletion, or setattr with a literal name) to a record member."""

    path: str
    line: int
    function: str
    leaf: str
    bag: str | None


class DynamicRead(msgspec.Struct, frozen=True):
    """A read whose member the census cannot name: getattr/setattr/hasattr with a computed
    name, vars(), __dict__, asdict(). Reported, never dropped."""

    path: str
    line: int
    function: str
    kind: str
    expr: str


class Taker(msgspec.Struct, frozen=True):
    """A function that takes a record instance as a parameter (the disposition table's rows)."""

    path: str
    line: int
    function: str
    parameter: str


class ModuleFindings(msgspec.Struct):
    """Everything found in one module."""

    reads: list[Read] = msgspec.field(default_factory=list)
    writes: list[Write] = msgspec.field(default_factory=list)
    dynamic: list[DynamicRead] = msgspec.field(default_factory=list)
    takers: list[Taker] = msgspec.field(default_factory=list)
