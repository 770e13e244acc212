"""The root a stack publishes: a bag whose every field is a namespace holding a bag.

This server's `Bags` is one root; another stack declares its own, or extends `Bags` with bags of
its own. The published root's type is what the leaf table, the wire decoder, `override()` and
`bag()` walk, and it declares the roles that read it and the invariants every change keeps.
"""

from __future__ import annotations

from typing import ClassVar

from config_bags.bags.base import Bag
from config_bags.roles import Roles
from config_bags.rules import Rule


class Root(Bag, frozen=True, kw_only=True):
    """Base of a stack's root of bags: `class EngineRoot(Root, frozen=True, kw_only=True)` with
    one field per namespace, each a `Bag` (nested bags allowed inside them).

    `ROLES` are the process roles that may publish it and the namespaces each reads (by default
    one role, `standalone`, reading everything); `invariants()` are rules every publish and
    override of it keeps, before any rules passed to `publish()` (by default none). A subclass
    inherits both and may replace either.
    """

    ROLES: ClassVar[Roles] = Roles({}, everything=("standalone",))

    @classmethod
    def invariants(cls) -> tuple[Rule, ...]:
        """The rules every bags of this root keep, whoever publishes them (none by default)."""
        return ()
