"""The root a stack publishes: a bag whose every field is a namespace holding a bag.

Each stack declares its own root (this server's is `config_bags.server.Bags`), or extends
another's with bags of its own. The published root's type is what the leaf table, the wire decoder, `override()` and
`bag()` walk, and it declares the roles that read it and the rules every change keeps, so every
process that publishes the type holds them.
"""

from __future__ import annotations

from typing import Any, ClassVar

from config_bags.bag import Bag, BagMeta
from config_bags.leaf_table import leaf_table
from config_bags.roles import Roles
from config_bags.rules import Rule


class RootMeta(BagMeta):
    """Checks a root's leaf names when its class is defined: two bags declaring one leaf name are
    refused there, naming both, rather than at the first override that names it."""

    def __new__(mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], **kwargs: Any) -> Any:
        cls = super().__new__(mcls, name, bases, namespace, **kwargs)
        try:
            leaf_table(cls)
        except NameError:  # an annotation names a bag not defined yet: publish() checks it instead
            pass
        return cls


class Root(Bag, frozen=True, kw_only=True, metaclass=RootMeta):
    """Base of a stack's root of bags: `class EngineRoot(Root)` (frozen, keyword-only) with
    one field per namespace, each a `Bag` (nested bags allowed inside them).

    `ROLES` are the process roles that may publish it and the namespaces each reads (by default
    one role, `standalone`, reading everything). Its rules are declared on it with `@rule(...)`
    methods (inherited, and replaced by a method of the same name) and `invariants()` returns
    them: every process that publishes this type checks them, at publish and at each override,
    whatever rules the call passes besides.
    """

    ROLES: ClassVar[Roles] = Roles({}, everything=("standalone",))

    @classmethod
    def invariants(cls) -> tuple[Rule, ...]:
        """The rules every root of this type keeps, whoever publishes it: its `@rule` methods and
        those it inherits, base classes' first."""
        found: dict[str, Rule] = {}
        for klass in reversed(cls.__mro__):
            for attr, value in vars(klass).items():
                if isinstance(value, Rule):
                    found[attr] = value
        return tuple(found.values())
