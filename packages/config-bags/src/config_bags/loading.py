"""Loading a root from the operator's layers: default < config file < environment < flags.

Every value is read and checked against its leaf as it is read; the first bad input raises a
one-line InputError naming where it was (flag, variable, file:line) and what the leaf accepts.
Each leaf the operator set keeps its provenance (`file`, `env`, `cli`) and origin (`cfg.yaml:3`,
`ENGINE_BLOCK_SIZE`, `--block-size 32`); every other leaf is `default`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

from config_bags.command_line import ArgvInput, CommandLine, flag_of, leaf_name_of, parsed_argv
from config_bags.config_file import config_file_entries
from config_bags.errors import InputError, LeafValueError
from config_bags.override import with_leaves
from config_bags.root import Root
from config_bags.schema import leaf_specs
from config_bags.text_values import parsed_text, parsed_value

InputLayer = Literal["default", "file", "env", "cli"]


class LeafInput(msgspec.Struct, frozen=True):
    """One leaf the operator set: its checked value, the layer it came from, and where exactly."""

    value: Any
    provenance: InputLayer
    origin: str


class Loaded(msgspec.Struct, frozen=True):
    """What the operator described: the leaves they set (the winning layer of each), and what
    they asked the launch to do (`--dump-config`, `--explain LEAF`)."""

    root_type: type[Root]
    given: dict[str, LeafInput]
    dump_config: bool
    explain: str | None

    def root(self) -> Root:
        """The root with every given leaf set, checked (each leaf, each bag's cross-leaf check and
        the root type's rules: LeafValueError, RuleBrokenError)."""
        return with_leaves(
            self.root_type(), {n: g.value for n, g in self.given.items()}, rules=self.root_type.invariants()
        )

    def provenance(self) -> dict[str, str]:
        """Every leaf's provenance: default, file, env or cli."""
        return {name: self.given[name].provenance if name in self.given else "default" for name in self._names()}

    def origins(self) -> dict[str, str]:
        """Every leaf's origin ('' for a default)."""
        return {name: self.given[name].origin if name in self.given else "" for name in self._names()}

    def _names(self) -> tuple[str, ...]:
        return tuple(leaf_specs(self.root_type))


def env_var_of(command: CommandLine, name: str) -> str:
    """`page_size` -> `SERVE_PAGE_SIZE` under the prefix `SERVE_`."""
    return command.env_prefix + name.upper()


def load(command: CommandLine, argv: list[str], environ: Mapping[str, str]) -> Loaded:
    """The leaves `argv`, `environ` (its variables under the command's prefix) and the --config
    file set, each layer over the one below: flags > environment > file > default."""
    cli = parsed_argv(command, argv)
    given: dict[str, LeafInput] = {}
    if cli.config is not None:
        given |= _file_layer(command, Path(cli.config))
    given |= _env_layer(command, environ)
    given |= _cli_layer(command, cli)
    explain = None if cli.explain is None else known_leaf(command, cli.explain, "--explain")
    return Loaded(root_type=command.root_type, given=given, dump_config=cli.dump_config, explain=explain)


def known_leaf(command: CommandLine, text: str, where: str) -> str:
    """The leaf `text` names (a flag, key or leaf name), or InputError naming close matches."""
    name = leaf_name_of(text)
    specs = leaf_specs(command.root_type)
    if name in specs:
        return name
    hint = _hint(command, name, flag_of, f"see {command.prog} --help for the accepted flags")
    raise InputError(f"{where}: unknown flag {text!r}; {hint}")


def _hint(command: CommandLine, name: str, spell: Callable[[str], str], otherwise: str) -> str:
    """`did you mean` the leaves closest to `name`, each spelt by `spell`, else `otherwise`."""
    close = difflib.get_close_matches(name, list(leaf_specs(command.root_type)), n=3)
    return f"did you mean {', '.join(spell(c) for c in close)}?" if close else otherwise


def _file_layer(command: CommandLine, path: Path) -> dict[str, LeafInput]:
    found: dict[str, LeafInput] = {}
    for entry in config_file_entries(path):
        where = f"{path}:{entry.line}" if entry.line else str(path)
        name = known_leaf(command, entry.key, f"{where}: key {entry.key!r}")
        try:
            value = parsed_value(leaf_specs(command.root_type)[name], entry.value)
        except LeafValueError as err:
            raise InputError(f"{where}: {err}") from None
        found[name] = LeafInput(value, "file", where)
    return found


def _env_layer(command: CommandLine, environ: Mapping[str, str]) -> dict[str, LeafInput]:
    specs = leaf_specs(command.root_type)
    prefix = command.env_prefix
    found: dict[str, LeafInput] = {}
    for var in sorted(v for v in environ if v.startswith(prefix)):
        name = var[len(prefix) :].lower()
        if name not in specs:
            hint = _hint(
                command,
                name,
                lambda leaf: env_var_of(command, leaf),
                f"accepted: {prefix}<FLAG> for a flag of {command.prog} --help",
            )
            raise InputError(f"unknown environment variable {var}; {hint}")
        try:
            value = parsed_text(specs[name], environ[var])
        except LeafValueError as err:
            raise InputError(f"{var}: {err}") from None
        found[name] = LeafInput(value, "env", var)
    return found


def _cli_layer(command: CommandLine, cli: ArgvInput) -> dict[str, LeafInput]:
    specs = leaf_specs(command.root_type)
    found: dict[str, LeafInput] = {}
    for name, text in cli.leaves.items():
        try:
            value = parsed_text(specs[name], text)
        except LeafValueError as err:
            raise InputError(f"{flag_of(name)}: {err}") from None
        found[name] = LeafInput(value, "cli", f"{flag_of(name)} {text}")
    return found
