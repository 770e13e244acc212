"""A stack's command line, built from its root type: one `--flag` per leaf, grouped by bag (the
bag's first docstring line as the group's description), help from the leaf's doc with what it
accepts, its default and whether it is hot; `--x [BOOL]` and `--no-x` for a boolean leaf; and
the launch-only inputs every loader takes (`--config`, `--dump-config`, `--explain`).

Values stay text here; `text_values` reads them against their leaves.
"""

from __future__ import annotations

import argparse
import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NoReturn

import msgspec

from config_bags.bag import Bag
from config_bags.errors import DefinitionError, InputError
from config_bags.leaf_table import LeafSpec
from config_bags.root import Root
from config_bags.schema import leaf_specs

LAUNCH_ONLY = ("config", "dump_config", "explain")


@dataclass(frozen=True)
class CommandLine:
    """How a stack's operator describes its root: the root type, the program's name and one-line
    description for `--help`, the prefix of its environment variables (`ENGINE_` reads
    `ENGINE_BLOCK_SIZE`), extra spellings of some flags (`{"model_path": ("--model",)}`), flags
    that set one leaf to one value as a peer's command line spells it (`{"--is-embedding": ("task",
    "embed")}`: given with the leaf's own flag too, a parse error, never one silently dropped), and
    the leaf and value its messages show as an example (`("block_size", "32")`)."""

    root_type: type[Root]
    prog: str
    env_prefix: str
    description: str = ""
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    value_flags: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    # The leaf and value the help and the messages show as an example (default: the root's first
    # leaf with its default value).
    example: tuple[str, str] | None = None


class ArgvInput(msgspec.Struct, frozen=True):
    """What the command line said: leaf texts by name, and the launch-only inputs."""

    leaves: dict[str, str]
    config: str | None
    dump_config: bool
    explain: str | None


def flag_of(name: str) -> str:
    """`page_size` -> `--page-size`."""
    return "--" + name.replace("_", "-")


def leaf_name_of(flag_or_key: str) -> str:
    """`--page-size`, `page-size` or `page_size` -> `page_size`."""
    return flag_or_key.lstrip("-").replace("-", "_")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise InputError(message)


def _help_of(spec: LeafSpec) -> str:
    default = "unset" if spec.default is None else spec.default
    if isinstance(default, bool):
        default = str(default).lower()
    temperature = "hot" if spec.hot else "cold"
    return f"{spec.help} [{spec.accepts()}; default {default}; {temperature}]".replace("%", "%%")


def _metavar_of(spec: LeafSpec) -> str:
    if spec.choices is not None:
        return "{" + ",".join(str(c) for c in spec.choices) + "}"
    if spec.value_type is bool:
        return "BOOL"
    return spec.accepts().split(" ")[0].upper()


def _bag_descriptions(root_type: type[Root]) -> dict[str, str]:
    """The first docstring line of each bag struct, by dotted namespace."""
    found: dict[str, str] = {}

    def walk(cls: type[Bag], prefix: str) -> None:
        for bag_field in msgspec.structs.fields(cls):
            if isinstance(bag_field.type, type) and issubclass(bag_field.type, Bag):
                name = f"{prefix}{bag_field.name}"
                found[name] = ((bag_field.type.__doc__ or "").strip().splitlines() or [""])[0]
                walk(bag_field.type, name + ".")

    walk(root_type, "")
    return found


def _example(command: CommandLine) -> tuple[str, str]:
    """A flag and a value, for the messages that show how to write one: the command's example,
    else the root's first leaf with its default."""
    if command.example is not None:
        return flag_of(command.example[0]), command.example[1]
    spec = next(iter(leaf_specs(command.root_type).values()), None)
    if spec is None or spec.default is None:
        return ("--flag" if spec is None else flag_of(spec.name)), "VALUE"
    return flag_of(spec.name), str(spec.default).lower() if isinstance(spec.default, bool) else str(spec.default)


def build_parser(command: CommandLine) -> argparse.ArgumentParser:
    """The argparse parser of `command`: a `launch` group, then a group per bag, one flag per
    leaf. A parse error raises InputError (one line) instead of exiting. DefinitionError when a
    `--no-x` or an alias collides with another flag."""
    precedence = f"Precedence: flag > {command.env_prefix}<FLAG> environment variable > --config file > default."
    p = _Parser(
        prog=command.prog,
        description=f"{command.description} {precedence}" if command.description else precedence,
        allow_abbrev=False,
    )
    launch = p.add_argument_group("launch")
    example = _example(command)
    launch.add_argument(
        "--config", metavar="FILE", help=f"YAML or TOML file of flag-name keys (e.g. {example[0][2:]}: {example[1]})."
    )
    launch.add_argument(
        "--dump-config",
        action="store_true",
        help="Print the resolved config as JSON with each leaf's provenance and exit.",
    )
    launch.add_argument(
        "--explain", metavar="FLAG", help="Print one leaf's resolved value and how it got it, and exit."
    )
    descriptions = _bag_descriptions(command.root_type)
    unknown = sorted({leaf for leaf, _ in command.value_flags.values()} - set(leaf_specs(command.root_type)))
    if unknown:
        raise DefinitionError(f"{command.prog}: value_flags name {', '.join(unknown)}; accepted: leaves of the root")
    groups: dict[str, argparse._ArgumentGroup] = {}
    try:
        for spec in leaf_specs(command.root_type).values():
            group = groups.get(spec.namespace)
            if group is None:
                group = groups[spec.namespace] = p.add_argument_group(spec.namespace, descriptions.get(spec.namespace))
            presets = {flag: value for flag, (leaf, value) in command.value_flags.items() if leaf == spec.name}
            _add_leaf(group, spec, (flag_of(spec.name), *command.aliases.get(spec.name, ())), presets)
    except argparse.ArgumentError as err:
        raise DefinitionError(
            f"{command.prog}: {err}; accepted: flags, no-flags and aliases that name one leaf each"
        ) from None
    return p


def _add_leaf(
    group: argparse._ArgumentGroup, spec: LeafSpec, flags: tuple[str, ...], presets: Mapping[str, str]
) -> None:
    common = {"dest": spec.name, "default": argparse.SUPPRESS}
    if presets:
        # Mutually exclusive with the leaf's own flags, so `--task generate --is-embedding` is an
        # error naming both rather than the last one winning.
        group = group.add_mutually_exclusive_group()
        for flag, value in presets.items():
            group.add_argument(flag, action="store_const", const=value, help=f"Same as {flags[0]} {value}.", **common)  # type: ignore[arg-type]
    if spec.value_type is not bool:
        group.add_argument(*flags, metavar=_metavar_of(spec), help=_help_of(spec), **common)  # type: ignore[arg-type]
        return
    # A bare `--x` means true, `--x false` says it in words, and `--no-x` means false.
    group.add_argument(*flags, nargs="?", const="true", metavar="BOOL", help=_help_of(spec), **common)  # type: ignore[arg-type]
    group.add_argument(
        "--no-" + flags[0][2:],
        action="store_const",
        const="false",
        help=f"Set {flags[0]} false.",
        **common,  # type: ignore[arg-type]
    )


def parsed_argv(command: CommandLine, argv: list[str]) -> ArgvInput:
    """The command line read into leaf texts; InputError for an unknown flag or a missing value,
    naming the flag and the close matches."""
    namespace, extras = build_parser(command).parse_known_args(argv)
    if extras:
        raise InputError(_unknown_message(command, extras[0]))
    given = vars(namespace)
    leaves = {name: str(given[name]) for name in leaf_specs(command.root_type) if name in given}
    return ArgvInput(
        leaves=leaves,
        config=given.get("config"),
        dump_config=bool(given.get("dump_config")),
        explain=given.get("explain"),
    )


def _unknown_message(command: CommandLine, token: str) -> str:
    if not token.startswith("-"):
        flag, value = _example(command)
        return f"unexpected argument {token!r}; every value follows its flag ({flag} {value})"
    flag = token.split("=", 1)[0]
    known = [flag_of(n) for n in (*leaf_specs(command.root_type), *LAUNCH_ONLY)]
    close = difflib.get_close_matches(flag, known, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; see {command.prog} --help for the accepted flags"
    return f"unknown flag {flag}{hint}"
