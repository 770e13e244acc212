"""Showing a root's configuration to an operator: every leaf with its value, provenance and
origin as JSON-able data (`--dump-config`), and a few lines on one leaf (`--explain`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from config_bags.loading import Loaded
from config_bags.override import leaf_value_of
from config_bags.root import Root
from config_bags.schema import leaf_spec, leaf_specs
from config_bags.state import hash_of


def dumped_leaves(
    root_type: type[Root], values: Mapping[str, Any], provenance: Mapping[str, str], origins: Mapping[str, str]
) -> dict[str, dict[str, Any]]:
    """Every leaf of `root_type`: its bag, value (JSON-able), provenance and origin."""
    return {
        name: {
            "bag": spec.namespace,
            "value": msgspec.to_builtins(values[name]),
            "provenance": provenance[name],
            "origin": origins[name],
        }
        for name, spec in leaf_specs(root_type).items()
    }


def explained_lines(root_type: type[Root], name: str, value: Any, provenance: str, origin: str) -> list[str]:
    """One leaf's value, where it came from, its bag and temperature, default, what it accepts
    and its help, one fact a line."""
    spec = leaf_spec(name, root_type)
    return [
        f"{name} = {value!r}",
        f"  provenance: {provenance}",
        f"  origin: {origin or '-'}",
        f"  bag: {spec.namespace} ({'hot' if spec.hot else 'cold'}); default {spec.default!r}; accepted: "
        f"{spec.accepts()}",
        f"  help: {spec.help}",
    ]


def dump(loaded: Loaded) -> dict[str, Any]:
    """JSON-able: the loaded root's hash and every leaf's bag, value, provenance and origin."""
    root = loaded.root()
    values = {name: leaf_value_of(root, name) for name in leaf_specs(loaded.root_type)}
    return {
        "config_hash": hash_of(root),
        "leaves": dumped_leaves(loaded.root_type, values, loaded.provenance(), loaded.origins()),
    }


def explain(loaded: Loaded, name: str) -> str:
    """A few lines on one leaf of the loaded root: its value and how it got it."""
    spec = leaf_spec(name, loaded.root_type)
    value = leaf_value_of(loaded.root(), spec.name)
    return "\n".join(explained_lines(loaded.root_type, name, value, loaded.provenance()[name], loaded.origins()[name]))
