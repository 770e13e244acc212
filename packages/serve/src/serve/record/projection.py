"""Projecting flat leaf values into the nested, typed `Bags` every process publishes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from config_bags import LeafValueError, leaf_specs
from config_bags.server import Bags


def bags_of(values: Mapping[str, Any]) -> Bags:
    """`Bags` holding `values` (flat leaf name -> value), defaults for leaves not named.

    Every bag's cross-leaf check runs here; a refused combination raises LeafValueError
    naming it.
    """
    specs = leaf_specs(Bags)
    nested: dict[str, Any] = {}
    for name, value in values.items():
        node = nested
        for part in specs[name].path[:-1]:
            node = node.setdefault(part, {})
        node[name] = value
    try:
        return msgspec.convert(nested, Bags, strict=True)
    except msgspec.ValidationError as err:
        raise LeafValueError(f"the values do not form valid bags: {err}") from None
