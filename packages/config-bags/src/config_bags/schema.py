"""The leaf table of a root: every leaf of every bag, found by walking the root's struct.

Leaf names are unique across a root's bags, so a flat flag name (`page_size`) maps to exactly
one leaf and one path (`("schedule", "page_size")`). Each root type has its own table, built
once; this server's `Bags` is the default root.
"""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any

import msgspec

from config_bags.bags.base import Bag
from config_bags.bags.root import Bags
from config_bags.errors import UnknownLeafError
from config_bags.leaf import HOT_KEY
from config_bags.leaf_types import accepted_text, is_leaf_meta, is_optional, literal_of, value_type_of
from config_bags.root import Root


class LeafSpec(msgspec.Struct, frozen=True):
    """One leaf: where it lives, its type, default, help, constraints and temperature."""

    name: str
    path: tuple[str, ...]
    annotation: Any
    value_type: Any
    default: Any
    help: str
    hot: bool

    @property
    def namespace(self) -> str:
        """The dotted bag the leaf lives in: `schedule`, `exec.kernel`."""
        return ".".join(self.path[:-1])

    @property
    def choices(self) -> tuple[Any, ...] | None:
        """The accepted values of a `Literal` leaf (None excluded), else None."""
        literal = literal_of(self.value_type)
        return None if literal is None else typing.get_args(literal)

    @property
    def optional(self) -> bool:
        """Whether the leaf may be unset (None)."""
        return is_optional(self.value_type)

    def accepts(self) -> str:
        """A short human description of the accepted values: `int >= 1`, `one of fcfs, lpm`."""
        return accepted_text(self.value_type)


def _walk(cls: type[Bag], prefix: tuple[str, ...]) -> list[LeafSpec]:
    hints = typing.get_type_hints(cls, include_extras=True)
    defaults = cls()
    found: list[LeafSpec] = []
    for name in cls.__struct_fields__:
        hint = hints[name]
        if isinstance(hint, type) and issubclass(hint, Bag):
            found.extend(_walk(hint, (*prefix, name)))
            continue
        if typing.get_origin(hint) is not Annotated:
            raise TypeError(f"{cls.__name__}.{name} is not declared with leaf(...)")
        metas = [m for m in typing.get_args(hint)[1:] if is_leaf_meta(m)]
        if len(metas) != 1:
            raise TypeError(f"{cls.__name__}.{name} needs exactly one leaf(...) annotation")
        meta = metas[0]
        found.append(
            LeafSpec(
                name=name,
                path=(*prefix, name),
                annotation=hint,
                value_type=value_type_of(hint),
                default=getattr(defaults, name),
                help=meta.description or "",
                hot=bool((meta.extra or {})[HOT_KEY]),
            )
        )
    return found


def all_leaves(root_type: type[Root] = Bags) -> list[LeafSpec]:
    """Every leaf of `root_type` in declaration order, duplicates included (the uniqueness test
    reads this)."""
    return _walk(root_type, ())


@cache
def leaf_specs(root_type: type[Root] = Bags) -> Mapping[str, LeafSpec]:
    """The leaf table of `root_type` keyed by flat leaf name. Raises if two bags declare the same
    name, or if a field of the root is not a bag."""
    root_fields(root_type)
    table: dict[str, LeafSpec] = {}
    for spec in all_leaves(root_type):
        if spec.name in table:
            raise TypeError(f"leaf {spec.name!r} is declared in both {table[spec.name].namespace} and {spec.namespace}")
        table[spec.name] = spec
    return types.MappingProxyType(table)


def leaf_spec(name: str, root_type: type[Root] = Bags) -> LeafSpec:
    """The spec of one leaf of `root_type`; an unknown name raises naming close matches."""
    table = leaf_specs(root_type)
    try:
        return table[name]
    except KeyError:
        raise UnknownLeafError(_unknown_message(name, table, root_type)) from None


def namespaces(root_type: type[Root] = Bags) -> tuple[str, ...]:
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
        raise TypeError(f"a root is a subclass of config_bags.Root, got {root_type!r}")
    hints = typing.get_type_hints(root_type)
    fields: dict[str, type[Bag]] = {}
    for name in root_type.__struct_fields__:
        hint = hints[name]
        if not (isinstance(hint, type) and issubclass(hint, Bag)):
            raise TypeError(
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
