"""The leaves of a tree of bags, found by walking its structs: each leaf's spec, and the table by
flat name that refuses two bags declaring one name.

It knows bags only, not roots, so the root base can check its leaf names the moment a root class
is defined.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Annotated, Any

import msgspec

from config_bags.bag import Bag
from config_bags.errors import DefinitionError
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


def walk_leaves(cls: type[Bag], prefix: tuple[str, ...] = ()) -> list[LeafSpec]:
    """Every leaf under the bag type `cls`, nested bags walked, in declaration order, duplicates
    included. DefinitionError for a field that is neither a bag nor declared with `leaf(...)`."""
    hints = typing.get_type_hints(cls, include_extras=True)
    defaults = _defaults_of(cls)
    found: list[LeafSpec] = []
    for name in cls.__struct_fields__:
        hint = hints[name]
        if isinstance(hint, type) and issubclass(hint, Bag):
            found.extend(walk_leaves(hint, (*prefix, name)))
            continue
        if typing.get_origin(hint) is not Annotated:
            raise DefinitionError(f"{cls.__name__}.{name} is not declared with leaf(...); accepted: a Bag or a leaf")
        metas = [m for m in typing.get_args(hint)[1:] if is_leaf_meta(m)]
        if len(metas) != 1:
            raise DefinitionError(f"{cls.__name__}.{name} needs exactly one leaf(...) annotation, got {len(metas)}")
        meta = metas[0]
        found.append(
            LeafSpec(
                name=name,
                path=(*prefix, name),
                annotation=hint,
                value_type=value_type_of(hint),
                default=defaults[name],
                help=meta.description or "",
                hot=bool((meta.extra or {})[HOT_KEY]),
            )
        )
    return found


def _defaults_of(cls: type[Bag]) -> dict[str, Any]:
    """Each field's default as a default instance holds it (normalized by the construction check:
    `1` for a float leaf is `1.0`); for a bag or root with a required field, which has no default
    instance, as declared (msgspec.NODEFAULT: none declared)."""
    try:
        instance = cls()
    except TypeError:  # a required field
        pass
    else:
        return {name: getattr(instance, name) for name in cls.__struct_fields__}
    found: dict[str, Any] = {}
    for info in msgspec.structs.fields(cls):
        if info.default is not msgspec.NODEFAULT:
            found[info.name] = info.default
        elif info.default_factory is not msgspec.NODEFAULT:
            found[info.name] = info.default_factory()
        else:
            found[info.name] = msgspec.NODEFAULT
    return found


@cache
def leaf_table(cls: type[Bag]) -> Mapping[str, LeafSpec]:
    """The leaves under `cls` keyed by flat name. DefinitionError when two bags declare the same
    name (a flat name, a flag, an override would not know which one it meant), naming both."""
    table: dict[str, LeafSpec] = {}
    for spec in walk_leaves(cls):
        first = table.get(spec.name)
        if first is not None:
            raise DefinitionError(
                f"{cls.__name__}: leaf {spec.name!r} is declared in both {_bag_at(cls, first)} and "
                f"{_bag_at(cls, spec)}; accepted: each leaf name declared once across a root (rename one)"
            )
        table[spec.name] = spec
    return types.MappingProxyType(table)


def _bag_at(root: type[Bag], spec: LeafSpec) -> str:
    """`CacheBag (cache)`: the bag type declaring `spec` and where it sits in `root`."""
    node: type[Bag] = root
    for part in spec.path[:-1]:
        node = typing.get_type_hints(node)[part]
    return f"{node.__name__} ({spec.namespace})"
