"""Which calls answer a bag, for the count of bag values copied into instance attributes: the
bag accessors (`get_schedule()`), the derived accessors (`chunk_size()`, and the `*_of` helpers
they call) and the bag types that mark a parameter (`schedule: ScheduleBag`).

Like the schema, they are an input (a JSON file or `module:callable`); by default they come
from this repository's `config_bags` when that is importable, and are empty otherwise (then
the census counts no copies).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from census.schema import SchemaError, is_config_root, loaded

KEYS = ("accessors", "derived", "types")


@dataclass(frozen=True)
class BagNames:
    """How the bags are spelled in the scanned code."""

    accessors: frozenset[str] = frozenset()
    derived: frozenset[str] = frozenset()
    types: frozenset[str] = frozenset()

    def spelled_in(self, source: str) -> bool:
        """Whether `source` spells any of these names (a file that spells none holds no copy)."""
        return any(name in source for names in (self.accessors, self.derived, self.types) for name in names)


# No bag names: no copy is counted (the default where none are handed in).
NO_BAGS = BagNames()


def _checked(table: Any, where: str) -> BagNames:
    if isinstance(table, BagNames):
        return table
    accepted = f"{where}: bag names must be a mapping with lists of names under {', '.join(KEYS)}"
    if not isinstance(table, Mapping) or not set(table) <= set(KEYS):
        raise SchemaError(accepted)
    lists = {key: table.get(key, []) for key in KEYS}
    if not all(
        isinstance(v, (list, tuple, set, frozenset)) and all(isinstance(n, str) for n in v) for v in lists.values()
    ):
        raise SchemaError(accepted)
    return BagNames(**{key: frozenset(v) for key, v in lists.items()})


def bag_names_of_root(root: type) -> BagNames:
    """What answers a bag of a config-bags root type: `bag(kind)`, a `get_<namespace>()` per
    top-level namespace (the convention of config-bags' named accessors), and every bag type it
    holds, itself included. config-bags is imported only here, when a root was handed in."""
    config_bags = importlib.import_module("config_bags")
    types = {kind.__name__ for kind in config_bags.bag_paths(root)} | {root.__name__}
    return BagNames(
        accessors=frozenset({"bag", *(f"get_{namespace}" for namespace in config_bags.root_fields(root))}),
        types=frozenset(types),
    )


def bag_names_from(argument: str) -> BagNames:
    """Load `argument`: a JSON object `{"accessors": [...], "derived": [...], "types": [...]}`,
    `module:callable` returning that mapping (or a BagNames), or `module:RootType`, a stack's
    config-bags root type (`bag_names_of_root`)."""
    table = loaded(argument, "bag names")
    return bag_names_of_root(table) if is_config_root(table) else _checked(table, argument)


def config_bags_bag_names() -> BagNames:
    """This repository's bag names: `get_<namespace>` for every top-level namespace of this
    server's `Bags`, every public function of `config_bags.server.derived` and
    `config_bags.server.derived_accessors`, every bag struct and the root; empty when config_bags is not
    installed."""
    try:
        server = importlib.import_module("config_bags.server")
        derived = [importlib.import_module(f"config_bags.server.{m}") for m in ("derived", "derived_accessors")]
        bags = importlib.import_module("config_bags.server.bags")
    except ImportError:
        return NO_BAGS
    accessors = {f"get_{namespace}" for namespace in server.Bags.__struct_fields__}
    functions = {
        name
        for module in derived
        for name, obj in vars(module).items()
        if inspect.isfunction(obj) and obj.__module__ == module.__name__ and not name.startswith("_")
    }
    return BagNames(
        accessors=frozenset({"bag", *(a for a in accessors if callable(getattr(server, a, None)))}),
        derived=frozenset(functions),
        types=frozenset({*bags.__all__, "Bags"}),
    )


def assumed_bag_names(bags: BagNames) -> str:
    """What the census assumed when no root or bag names were handed in, in one line."""
    if bags == NO_BAGS:
        return "no --config-root or --bags given and config_bags is not installed: no copies are counted"
    return (
        "no --config-root or --bags given: counting copies through this repository's config_bags.server "
        f"({', '.join(sorted(bags.accessors))}, and {len(bags.derived)} derived helpers); "
        "pass --config-root module:RootType for another stack's"
    )
