"""The leaf table of a root: every leaf of every bag, found by walking the root's struct.

Leaf names are unique across a root's bags, so a flat flag name (`page_size`) maps to exactly
one leaf and one path (`("schedule", "page_size")`). Each root type has its own table, built
once; every function here takes the root type it answers for.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from functools import cache

from config_bags.bag import Bag
from config_bags.errors import DefinitionError, UnknownLeafError
from config_bags.leaf_table import LeafSpec, leaf_table, walk_leaves
from config_bags.root import Root


def all_leaves(root_type: type[Root]) -> list[LeafSpec]:
    """Every leaf of `root_type` in declaration order, duplicates included (the uniqueness test
    reads this)."""
    return walk_leaves(root_type)


@cache
def leaf_specs(root_type: type[Root]) -> Mapping[str, LeafSpec]:
    """The leaf table of `root_type` keyed by flat leaf name. DefinitionError if two bags declare
    the same name (naming both), or if a field of the root is not a bag."""
    root_fields(root_type)
    return leaf_table(root_type)


def leaf_spec(name: str, root_type: type[Root]) -> LeafSpec:
    """The spec of one leaf of `root_type`; an unknown name raises naming close matches."""
    table = leaf_specs(root_type)
    try:
        return table[name]
    except KeyError:
        raise UnknownLeafError(_unknown_message(name, table, root_type)) from None


def namespaces(root_type: type[Root]) -> tuple[str, ...]:
    """Every dotted bag name of `root_type` that holds leaves, in declaration order."""
    seen: dict[str, None] = {}
    for spec in leaf_specs(root_type).values():
        seen.setdefault(spec.namespace, None)
    return tuple(seen)


@cache
def root_fields(root_type: type[Root]) -> Mapping[str, type[Bag]]:
    """The top-level namespaces of `root_type` (the names roles read) and the bag type of each.
    Raises TypeError for a root that is not a `Root`, or a field of it that is not a bag."""
    if not (isinstance(root_type, type) and issubclass(root_type, Root)):
        raise DefinitionError(f"a root is a subclass of config_bags.Root, got {root_type!r}")
    hints = typing.get_type_hints(root_type)
    fields: dict[str, type[Bag]] = {}
    for name in root_type.__struct_fields__:
        hint = hints[name]
        if not (isinstance(hint, type) and issubclass(hint, Bag)):
            raise DefinitionError(
                f"{root_type.__name__}.{name} is not a bag; every field of a root is a namespace holding a Bag"
            )
        fields[name] = hint
    return types.MappingProxyType(fields)


@cache
def bag_paths(root_type: type[Root]) -> Mapping[type[Bag], tuple[tuple[str, ...], ...]]:
    """Every bag type `root_type` holds, nested ones included, with the field path(s) holding it,
    in declaration order."""
    found: dict[type[Bag], list[tuple[str, ...]]] = {}

    def walk(cls: type[Bag], prefix: tuple[str, ...]) -> None:
        hints = typing.get_type_hints(cls)
        for name in cls.__struct_fields__:
            hint = hints[name]
            if isinstance(hint, type) and issubclass(hint, Bag):
                found.setdefault(hint, []).append((*prefix, name))
                walk(hint, (*prefix, name))

    walk(root_type, ())
    return types.MappingProxyType({kind: tuple(paths) for kind, paths in found.items()})


def _unknown_message(name: str, table: Mapping[str, LeafSpec], root_type: type[Root]) -> str:
    close = difflib.get_close_matches(name, list(table), n=3)
    root = root_type.__name__
    hint = (
        f"; did you mean {', '.join(close)}? (leaves of {root})"
        if close
        else f"; {root} declares no such leaf (see leaf_specs({root}))"
    )
    return f"unknown leaf {name!r}{hint}"
