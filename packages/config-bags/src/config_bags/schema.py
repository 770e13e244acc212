"""The leaf table: every leaf of every bag, found by walking the `Bags` struct.

Leaf names are unique across bags, so a flat flag name (`page_size`) maps to exactly one
leaf and one path (`("schedule", "page_size")`).
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


def all_leaves() -> list[LeafSpec]:
    """Every leaf in declaration order, duplicates included (the uniqueness test reads this)."""
    return _walk(Bags, ())


@cache
def leaf_specs() -> Mapping[str, LeafSpec]:
    """The leaf table keyed by flat leaf name. Raises if two bags declare the same name."""
    table: dict[str, LeafSpec] = {}
    for spec in all_leaves():
        if spec.name in table:
            raise TypeError(f"leaf {spec.name!r} is declared in both {table[spec.name].namespace} and {spec.namespace}")
        table[spec.name] = spec
    return types.MappingProxyType(table)


def leaf_spec(name: str) -> LeafSpec:
    """The spec of one leaf; an unknown name raises naming close matches."""
    table = leaf_specs()
    try:
        return table[name]
    except KeyError:
        raise UnknownLeafError(_unknown_message(name, table)) from None


def namespaces() -> tuple[str, ...]:
    """Every dotted bag name that holds leaves, in declaration order."""
    seen: dict[str, None] = {}
    for spec in leaf_specs().values():
        seen.setdefault(spec.namespace, None)
    return tuple(seen)


def _unknown_message(name: str, table: Mapping[str, LeafSpec]) -> str:
    close = difflib.get_close_matches(name, list(table), n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see leaf_specs() for the accepted names"
    return f"unknown leaf {name!r}{hint}"
