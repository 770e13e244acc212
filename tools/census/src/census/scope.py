"""A scope of the module scan (the module, a class body, a function or a comprehension): what its
names hold (record aliases, holders of the record, bag values), the record names it rebinds to
something else, its class's parking, and where a `global`, `nonlocal` or walrus binding lands."""

from __future__ import annotations

from typing import Literal, NamedTuple

from census.bag_values import BagValue
from census.findings import Shape

ScopeKind = Literal["module", "class", "function", "comprehension"]
NO_PARKING: frozenset[str] = frozenset()


class Bindings(NamedTuple):
    """What a scope's names hold at one point of the walk (copies)."""

    env: dict[str, Shape]
    holders: set[str]
    shadowed: set[str]
    bags: dict[str, BagValue]


class Scope:
    """`env` maps a name to how it reaches the record; `holders` are the names bound to a value
    that holds the record where the census cannot name it (a tuple, a list, an element of one);
    `shadowed` are the record names an import rebinds; `owner` is the qualified name of the
    class whose instance `self_name` names."""

    __slots__ = (
        "qualname",
        "kind",
        "parent",
        "env",
        "holders",
        "shadowed",
        "bags",
        "self_name",
        "owner",
        "parked",
        "inherited",
        "globals",
        "nonlocals",
    )

    def __init__(
        self,
        qualname: str,
        kind: ScopeKind,
        parent: Scope | None,
        self_name: str | None,
        owner: str | None,
        parked: set[str],
        inherited: frozenset[str] = NO_PARKING,
    ) -> None:
        self.qualname = qualname
        self.kind: ScopeKind = kind
        self.parent = parent
        self.env: dict[str, Shape] = {} if parent is None else dict(parent.env)
        self.holders: set[str] = set() if parent is None else set(parent.holders)
        self.shadowed: set[str] = set() if parent is None else set(parent.shadowed)
        self.bags: dict[str, BagValue] = {} if parent is None else dict(parent.bags)
        self.self_name = self_name
        self.owner = owner
        self.parked = parked
        self.inherited = inherited
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()

    @classmethod
    def module(cls) -> Scope:
        """The module's own scope."""
        return cls("<module>", "module", None, None, None, set())

    def function(self, qualname: str, self_name: str | None) -> Scope:
        """A function's scope inside this one: copies of the name tables (closures see them),
        the same parking."""
        return Scope(qualname, "function", self, self_name, self.owner, self.parked, self.inherited)

    def class_body(self, qualname: str, inherited: frozenset[str]) -> Scope:
        """A class body: parking of its own, and what its bases hand down."""
        return Scope(qualname, "class", self, None, qualname, set(), inherited)

    def comprehension(self) -> Scope:
        """A comprehension's scope: its targets are its own, its reads belong to this function."""
        return Scope(self.qualname, "comprehension", self, self.self_name, self.owner, self.parked, self.inherited)

    def child(self, name: str) -> str:
        """The qualified name of a function or class defined here."""
        return name if self.qualname == "<module>" else f"{self.qualname}.{name}"

    def forget(self, name: str) -> None:
        """`name` is rebound: whatever it held is gone."""
        self.env.pop(name, None)
        self.holders.discard(name)
        self.shadowed.discard(name)
        self.bags.pop(name, None)

    def carry(self, name: str, into: Scope) -> None:
        """Give `into` this scope's binding of `name`."""
        into.forget(name)
        if name in self.env:
            into.env[name] = self.env[name]
        if name in self.holders:
            into.holders.add(name)
        if name in self.shadowed:
            into.shadowed.add(name)
        if name in self.bags:
            into.bags[name] = self.bags[name]

    def bindings(self) -> Bindings:
        """A copy of what the names hold here, to walk another branch from."""
        return Bindings(dict(self.env), set(self.holders), set(self.shadowed), dict(self.bags))

    def restore(self, bindings: Bindings) -> None:
        """Walk on from `bindings` (the start of another branch)."""
        self.env, self.holders, self.shadowed, self.bags = (
            dict(bindings.env),
            set(bindings.holders),
            set(bindings.shadowed),
            dict(bindings.bags),
        )

    def join(self, other: Bindings) -> None:
        """After branches: a name may hold what it holds at the end of any of them (an alias in
        one stays an alias); a record name is shadowed only where every branch shadows it."""
        for name, shape in other.env.items():
            self.env.setdefault(name, shape)
        self.holders |= other.holders
        self.shadowed &= other.shadowed
        for name, held in other.bags.items():
            self.bags.setdefault(name, held)

    def after(self, ends: list[Bindings]) -> None:
        """Walk on from the end of whichever branch ran: what any of `ends` leaves."""
        self.restore(ends[0])
        for end in ends[1:]:
            self.join(end)

    def landing(self, name: str, walrus: bool = False) -> Scope | None:
        """The other scope a binding of `name` here binds: the module for a `global` name, the
        enclosing function for a `nonlocal` one, the enclosing function for a walrus in a
        comprehension (PEP 572); None when it binds only here."""
        if name in self.globals:
            root = self
            while root.parent is not None:
                root = root.parent
            return root if root is not self else None
        if name in self.nonlocals or (walrus and self.kind == "comprehension"):
            outer = self.parent
            while outer is not None and outer.kind in ("class", "comprehension"):
                outer = outer.parent
            return outer
        return None
