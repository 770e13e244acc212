"""What the census finds: reads, writes, dynamic findings (the blind spots), the functions that
take the record and the classes that park it, and copies of bag values into instance
attributes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Shape = Literal["direct", "alias", "getattr", "parked", "inherited"]
SHAPES: tuple[Shape, ...] = ("direct", "alias", "getattr", "parked", "inherited")


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
    """What the census cannot follow, reported, never dropped: a read whose member it cannot
    name (getattr/setattr/hasattr with a computed name, vars(), __dict__, asdict(), a class
    pattern's positional members: `kind` is that call or `match_args`), or a binding that may
    hold the record where it cannot name which part does (a container or an element of one
    bound to a name, the record stored into a container or an attribute not spelled like the
    record: `kind` names the binding form, `expr` shows it)."""

    path: str
    line: int
    function: str
    kind: str
    expr: str


@dataclass(frozen=True, slots=True)
class Taker:
    """A function that takes a record instance as a parameter (named or annotated like the
    record, or defaulting to it): the disposition table's rows."""

    path: str
    line: int
    function: str
    parameter: str


@dataclass(frozen=True, slots=True)
class Parker:
    """A class whose instances keep the record: one of its methods parks it on the instance
    (`self.args = server_args`)."""

    path: str
    line: int
    owner: str
    function: str
    attribute: str


@dataclass(frozen=True, slots=True)
class Copy:
    """A bag value stored on an instance (`self.x = get_schedule().page_size`): the copy keeps
    the value it had then, so it does not follow an override. `leaf` is the last member read
    off a bag (None: a whole bag or a derived accessor's answer); `value` is the stored
    expression as written."""

    path: str
    line: int
    function: str
    target: str
    value: str
    leaf: str | None
    bag: str | None


@dataclass(frozen=True, slots=True)
class ClassFacts:
    """What the class graph needs of one class: its bases as written (dotted names) and the
    attributes its methods park the record on."""

    bases: tuple[str, ...]
    parked: frozenset[str]


@dataclass(slots=True)
class ModuleFindings:
    """Everything found in one module, and its classes and imports for the class graph."""

    reads: list[Read] = field(default_factory=list)
    writes: list[Write] = field(default_factory=list)
    dynamic: list[DynamicRead] = field(default_factory=list)
    takers: list[Taker] = field(default_factory=list)
    parkers: list[Parker] = field(default_factory=list)
    copies: list[Copy] = field(default_factory=list)
    classes: dict[str, ClassFacts] = field(default_factory=dict)
    # bound name -> (relative level, dotted target): `import a.b` binds a -> (0, "a"),
    # `import a.b as m` binds m -> (0, "a.b"), `from ..m import C as D` binds D -> (2, "m.C").
    imports: dict[str, tuple[int, str]] = field(default_factory=dict)
