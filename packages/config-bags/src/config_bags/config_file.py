"""Reading a config file: YAML (.yaml, .yml) or TOML (.toml), a flat mapping whose keys are flag
names (`page-size` or `page_size`). Errors name the file and the line.

TOML is read by the standard library; YAML needs PyYAML (`pip install config-bags[yaml]`), which
is imported only when a YAML file is read, so a stack reading TOML depends on msgspec alone.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import msgspec

from config_bags.errors import ConfigFileError

SUFFIXES = {".yaml": "YAML", ".yml": "YAML", ".toml": "TOML"}


class FileEntry(msgspec.Struct, frozen=True):
    """One key of a config file, with the line it sits on (1-based; 0 when unknown)."""

    key: str
    value: Any
    line: int


def config_file_entries(path: Path) -> list[FileEntry]:
    """The entries of `path`, in file order; ConfigFileError when it cannot be read or parsed."""
    kind = SUFFIXES.get(path.suffix.lower())
    if kind is None:
        raise ConfigFileError(f"{path}: unknown config file type {path.suffix!r}; accepted: .yaml, .yml, .toml")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigFileError(f"{path}: cannot read config file: {err.strerror or err}") from None
    return _yaml_entries(path, text) if kind == "YAML" else _toml_entries(path, text)


def _yaml_entries(path: Path, text: str) -> list[FileEntry]:
    try:
        import yaml  # optional: only a YAML file needs it
    except ImportError:
        raise ConfigFileError(
            f"{path}: reading YAML needs PyYAML, which is not installed; install config-bags[yaml], or use a .toml file"
        ) from None
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigFileError(f"{path}{line}: cannot parse YAML: {problem}") from None
    if data is None:
        return []
    if not isinstance(data, dict) or not isinstance(node, yaml.MappingNode):
        raise ConfigFileError(f"{path}:1: the config file must be a mapping of flag names to values")
    lines = {str(key.value): key.start_mark.line + 1 for key, _ in node.value}
    return [FileEntry(str(key), value, lines.get(str(key), 0)) for key, value in data.items()]


def _toml_entries(path: Path, text: str) -> list[FileEntry]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        where = re.search(r"line (\d+)", str(err))
        line = f":{where.group(1)}" if where else ""
        raise ConfigFileError(f"{path}{line}: cannot parse TOML: {err}") from None
    return [FileEntry(key, value, _toml_line(text, key)) for key, value in data.items()]


def _toml_line(text: str, key: str) -> int:
    pattern = re.compile(rf"^[ \t]*(\[[ \t]*)?[\"']?{re.escape(key)}[\"']?[ \t]*(=|\])", re.MULTILINE)
    found = pattern.search(text)
    return text.count("\n", 0, found.start()) + 1 if found else 0
