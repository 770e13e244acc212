"""The leaf -> bag map the census labels reads with, and how the census loads what it is
handed. The census never imports a schema at module level: it takes one as input (a JSON file,
`module:callable` or a config-bags root type), and falls back to this repository's `config_bags` only when that is
importable."""

from __future__ import annotations

import importlib
import json
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class SchemaError(ValueError):
    """A schema argument the census cannot load; the message says what is accepted."""


def _checked(table: Any, where: str) -> dict[str, str]:
    if isinstance(table, Mapping) and all(hasattr(v, "namespace") for v in table.values()):
        table = {name: spec.namespace for name, spec in table.items()}  # config-bags' leaf_specs(Root)
    if not isinstance(table, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
        raise SchemaError(
            f"{where}: accepted: a mapping of leaf name to bag name (str -> str), config-bags' leaf_specs(Root), "
            "or a config-bags root type"
        )
    return dict(table)


def loaded(argument: str, what: str) -> Any:
    """What `argument` names, for an input the census is handed rather than imports: a path to
    a JSON document, or `module:callable` (called), `module:attribute` or `module:Class` (a class
    as it is: a config-bags root type). `what` names the input in error messages."""
    path = Path(argument)
    if path.suffix == ".json" or path.is_file():
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as err:
            raise SchemaError(f"{argument}: cannot read the {what} JSON: {err}") from None
    module_name, _, attr = argument.partition(":")
    if not attr:
        raise SchemaError(f"{argument!r}: accepted: a .json file or module:callable")
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as err:
        raise SchemaError(f"{argument}: cannot import the {what}: {err}") from None
    return target if isinstance(target, type) or not callable(target) else target()


def schema_from(argument: str) -> dict[str, str]:
    """Load `argument`: a path to a JSON object, `module:callable` returning the mapping, or
    `module:RootType`, a stack's config-bags root type."""
    table = loaded(argument, "schema")
    return schema_of_root(table) if is_config_root(table) else _checked(table, argument)


def is_config_root(value: Any) -> bool:
    """Whether `value` is a config-bags root type (a class with struct fields and `invariants`)."""
    return isinstance(value, type) and hasattr(value, "__struct_fields__") and hasattr(value, "invariants")


def schema_of_root(root: type) -> dict[str, str]:
    """A config-bags root type's leaf -> dotted bag map. config-bags is imported only here, when
    a root was handed in (the root's own package depends on it)."""
    config_bags = importlib.import_module("config_bags")
    return {name: spec.namespace for name, spec in config_bags.leaf_specs(root).items()}


def config_bags_schema() -> dict[str, str]:
    """This repository's schema (leaf -> dotted bag), or {} when config_bags is not installed."""
    try:
        config_bags = importlib.import_module("config_bags")
        server = importlib.import_module("config_bags.server")
    except ImportError:
        return {}
    return {name: spec.namespace for name, spec in config_bags.leaf_specs(server.Bags).items()}


def config_root_from(argument: str) -> type:
    """The config-bags root type `argument` (module:RootType) names; SchemaError otherwise."""
    root = loaded(argument, "config root")
    if not is_config_root(root):
        raise SchemaError(f"{argument}: accepted: module:RootType naming a config_bags.Root subclass; got {root!r}")
    return typing.cast(type, root)
