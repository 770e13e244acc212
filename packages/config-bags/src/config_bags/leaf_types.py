"""What a leaf's annotation accepts: its value type without the `leaf(...)` metadata, and the
short text that tells an operator the accepted values (`int >= 1`, `one of fcfs, lpm`)."""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Literal

import msgspec

from config_bags.constraints import INT64_MAX
from config_bags.leaf import HOT_KEY


def is_leaf_meta(extra: object) -> bool:
    """Whether `extra` (one argument of an `Annotated`) is the `leaf(...)` declaration."""
    return isinstance(extra, msgspec.Meta) and bool(extra.extra) and HOT_KEY in (extra.extra or {})


def value_type_of(annotation: Any) -> Any:
    """The leaf's value type with its constraints but without its `leaf(...)` declaration."""
    if typing.get_origin(annotation) is not Annotated:
        return annotation
    value_type, *extras = typing.get_args(annotation)
    constraints = [m for m in extras if isinstance(m, msgspec.Meta) and not is_leaf_meta(m)]
    if constraints:  # Annotated flattened a constrained alias into the leaf's annotation
        return Annotated[(value_type, *constraints)]
    return value_type


def literal_of(tp: Any) -> Any:
    """The `Literal[...]` inside `tp` (alone or in a union), else None."""
    if typing.get_origin(tp) is Literal:
        return tp
    for arg in typing.get_args(tp) if is_union(tp) else ():
        if typing.get_origin(arg) is Literal:
            return arg
    return None


def is_union(tp: Any) -> bool:
    """Whether `tp` is a union (`A | B` or `Union[A, B]`)."""
    return typing.get_origin(tp) in (typing.Union, types.UnionType)


def is_optional(tp: Any) -> bool:
    """Whether `tp` admits None."""
    return is_union(tp) and type(None) in typing.get_args(tp)


def strip_optional(tp: Any) -> Any:
    """`tp` without None in its union."""
    if not is_optional(tp):
        return tp
    rest = [a for a in typing.get_args(tp) if a is not type(None)]
    return rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]  # noqa: UP007 (a union of a runtime tuple: `|` has no such form)


def accepted_text(value_type: Any) -> str:
    """A short human description of the values `value_type` accepts."""
    literal = literal_of(value_type)
    if literal is not None:
        text = "one of " + ", ".join(str(c) for c in typing.get_args(literal))
    else:
        text = _describe(strip_optional(value_type))
    return f"{text}, or unset" if is_optional(value_type) else text


def _bound_text(bound: float) -> str:
    return "2^63-1" if bound == INT64_MAX else str(bound)


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
                text += f"{' and' if text[-1].isdigit() else ''} {sign} {_bound_text(bound)}"
        if meta.min_length is not None:
            text += f" of length >= {meta.min_length}"
        if meta.pattern is not None:  # the pattern's title says it as an operator writes it
            text += f" of the form {meta.title or meta.pattern}"
    return text
