"""Turning the text an operator typed (a flag, an environment variable, a config string) into a
leaf's value of any root, then checking it against the leaf's type and constraints.

Booleans accept true/false/1/0/yes/no/on/off; an optional leaf accepts "none" or "" for unset;
a tuple leaf accepts a comma-separated list.
"""

from __future__ import annotations

import types
import typing
from typing import Annotated, Any, Literal

from config_bags.errors import LeafValueError
from config_bags.leaf_table import LeafSpec
from config_bags.override import checked_value

TRUE_WORDS = frozenset({"true", "1", "yes", "on"})
FALSE_WORDS = frozenset({"false", "0", "no", "off"})
UNSET_WORDS = frozenset({"none", ""})


def base_type(tp: Any) -> Any:
    """`tp` without its `Annotated` constraints and without `None` in a union."""
    if typing.get_origin(tp) is Annotated:
        return base_type(typing.get_args(tp)[0])
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        rest = [a for a in typing.get_args(tp) if a is not type(None)]
        return base_type(rest[0]) if len(rest) == 1 else tp
    return tp


def _parse_scalar(tp: Any, text: str) -> Any:
    """One scalar from text; raises ValueError when the text is not of that type."""
    tp = base_type(tp)
    if typing.get_origin(tp) is Literal:
        return text  # the choice check belongs to checked_value, which names the choices
    if tp is bool:
        word = text.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise ValueError(f"not a boolean: {text!r}")
    if tp is int:
        return int(text.strip())
    if tp is float:
        return float(text.strip())
    return text


def parsed_text(spec: LeafSpec, text: str) -> Any:
    """The leaf value `text` spells, checked; LeafValueError naming the leaf and what it accepts."""
    if spec.optional and text.strip().lower() in UNSET_WORDS:
        return None
    tp = base_type(spec.value_type)
    try:
        if typing.get_origin(tp) is tuple:
            element = typing.get_args(tp)[0]
            value: Any = tuple(_parse_scalar(element, part) for part in text.split(",") if part.strip())
        else:
            value = _parse_scalar(tp, text)
    except ValueError:
        raise LeafValueError(f"{spec.name}: cannot read {text!r}; accepted: {spec.accepts()}") from None
    return checked_value(spec, value)


def parsed_value(spec: LeafSpec, raw: Any) -> Any:
    """A value from a config file: text goes through `parsed_text`, a typed value (YAML and TOML
    numbers, booleans, lists) is checked as it is."""
    if isinstance(raw, str):
        return parsed_text(spec, raw)
    if isinstance(raw, list):
        raw = tuple(raw)
    return checked_value(spec, raw)
