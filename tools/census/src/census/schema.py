"""The leaf -> bag map the census labels reads with, and how the census loads what it is
handed. The census never imports a schema at module level: it takes one as input (a JSON file
or `module:callable`), and falls back to this repository's `config_bags` only when that is
importable."""

from __future__ import annotations

import importlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any


class SchemaError(ValueError):
    """A schema argument the census cannot load; the message says what is accepted."""


def _checked(table: Any, where: str) -> dict[str, str]:
    if not isinstance(table, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in table.items()):
        raise SchemaError(f"{where}: a schema must be a mapping of leaf name to bag name (str -> str)")
    return dict(table)


def loaded(argument: str, what: str) -> Any:
    """What `argument` names, for an input the census is handed rather than imports: a path to
    a JSON document, or `module:callable` (called) or `module:attribute`. `what` names the input
    in error messages."""
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
    return target() if callable(target) else target


def schema_from(argument: str) -> dict[str, str]:
    """Load `argument`: a path to a JSON object, or `module:callable` returning the mapping."""
    return _checked(loaded(argument, "schema"), argument)


def config_bags_schema() -> dict[str, str]:
    """This repository's schema (leaf -> dotted bag), or {} when config_bags is not installed."""
    try:
        config_bags = importlib.import_module("config_bags")
        server = importlib.import_module("config_bags.server")
    except ImportError:
        return {}
    return {name: spec.namespace for name, spec in config_bags.leaf_specs(server.Bags).items()}
