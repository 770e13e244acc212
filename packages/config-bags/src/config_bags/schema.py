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
from typing import Annotated, Any, Literal

import msgspec

from config_bags.bags.base import Bag
from config_bags.bags.root import Bags
from config_bags.errors import UnknownLeafError
from config_bags.leaf import HOT_KEY


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
        literal = _literal_of(self.value_type)
        return None if literal is None else typing.get_args(literal)

    @property
    def optional(self) -> bool:
        """Whether the leaf may be unset (None)."""
        return _is_optional(self.value_type)

    def accepts(self) -> str:
        """A short human description of the accepted values: `int >= 1`, `one of fcfs, lpm`."""
        choices = self.choices
        if choices is not None:
            text = "one of " + ", ".join(str(c) for c in choices)
        else:
            text = _describe(_strip_optional(self.value_type))
        return f"{text}, or unset" if self.optional else text


def _describe(tp: Any) -> str:
    """`int >= 1`, `str of length >= 1`, `list of int >= 1`: the type and its constraints."""
    base, metas = tp, []
    if typing.get_origin(tp) is Annotated:
        base, *extras = typing.get_args(tp)
        metas = [m for m in extras if isinstance(m, msgspec.Meta)]
    if typing.get_origin(base) is tuple:
        text = f"list of {_describe(typing.get_args(base)[0])}"
    else:
        text = getattr(base, "__name__", str(base))
    for meta in metas:
        for attr, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            bound = getattr(meta, attr)
            if bound is not None:
                text += f"{' and' if text[-1].isdigit() else ''} {sign} {bound}"
        if meta.min_length is not None:
            text += f" of length >= {meta.min_length}"
    return text


def _literal_of(tp: Any) -> Any:
    if typing.get_origin(tp) is Literal:
        return tp
    for arg in typing.get_args(tp) if _is_union(tp) else ():
        if typing.get_origin(arg) is Literal:
            return arg
    return None


def _is_union(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def _is_optional(tp: Any) -> bool:
    return _is_union(tp) and type(None) in typing.get_args(tp)


def _strip_optional(tp: Any) -> Any:
    if not _is_optional(tp):
        return tp
    rest = [a for a in typing.get_args(tp) if a is not type(None)]
    return rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]


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
        value_type, *extras = typing.get_args(hint)
        metas = [m for m in extras if isinstance(m, msgspec.Meta) and m.extra and HOT_KEY in m.extra]
        if len(metas) != 1:
            raise TypeError(f"{cls.__name__}.{name} needs exactly one leaf(...) annotation")
        meta = metas[0]
        constraints = [m for m in extras if isinstance(m, msgspec.Meta) and m is not meta]
        if constraints:  # Annotated flattened a constrained alias into the leaf's annotation
            value_type = Annotated[(value_type, *constraints)]
        found.append(
            LeafSpec(
                name=name,
                path=(*prefix, name),
                annotation=hint,
                value_type=value_type,
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
