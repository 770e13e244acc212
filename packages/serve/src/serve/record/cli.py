"""The `serve` command line: one `--flag` per leaf, grouped by bag, plus the launch-only inputs
(--config, --dump-config, --explain). Values stay text here; `text_values` reads them."""

from __future__ import annotations

import argparse
import difflib
from typing import NoReturn

import msgspec

from config_bags import LeafSpec, leaf_specs
from config_bags.server import Bags
from serve.record.errors import LaunchInputError

LAUNCH_ONLY = ("config", "dump_config", "explain")

# Short spellings operators know from other servers (`serve --model PATH`), command line only.
FLAG_ALIASES: dict[str, tuple[str, ...]] = {"model_path": ("--model",)}


def flag_of(name: str) -> str:
    """`page_size` -> `--page-size`."""
    return "--" + name.replace("_", "-")


def leaf_name_of(flag_or_key: str) -> str:
    """`--page-size`, `page-size` or `page_size` -> `page_size`."""
    return flag_or_key.lstrip("-").replace("-", "_")


class CliInput(msgspec.Struct, frozen=True):
    """What the command line said: leaf texts by name, and the launch-only inputs."""

    leaves: dict[str, str]
    config: str | None
    dump_config: bool
    explain: str | None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise LaunchInputError(message)


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


def _bag_descriptions() -> dict[str, str]:
    """The first docstring line of each bag struct, by dotted namespace."""
    found: dict[str, str] = {}

    def walk(cls: type, prefix: str) -> None:
        for field in msgspec.structs.fields(cls):
            if isinstance(field.type, type) and issubclass(field.type, msgspec.Struct):
                name = f"{prefix}{field.name}"
                found[name] = (field.type.__doc__ or "").strip().splitlines()[0]
                walk(field.type, name + ".")

    walk(Bags, "")
    return found


def parser() -> argparse.ArgumentParser:
    """The argparse parser of `serve`: a group per bag, one flag per leaf."""
    p = _Parser(
        prog="serve",
        description="Serve an LLM over an OpenAI-compatible HTTP API. Precedence: flag > SERVE_<FLAG> "
        "environment variable > --config file > default.",
        allow_abbrev=False,
    )
    launch = p.add_argument_group("launch")
    launch.add_argument("--config", metavar="FILE", help="YAML or TOML file of flag-name keys (e.g. page-size: 16).")
    launch.add_argument(
        "--dump-config",
        action="store_true",
        help="Print the resolved config as JSON with each leaf's provenance and exit.",
    )
    launch.add_argument(
        "--explain", metavar="FLAG", help="Print one leaf's resolved value and how it got it, and exit."
    )
    descriptions = _bag_descriptions()
    groups: dict[str, argparse._ArgumentGroup] = {}
    for spec in leaf_specs(Bags).values():
        group = groups.get(spec.namespace)
        if group is None:
            group = groups[spec.namespace] = p.add_argument_group(spec.namespace, descriptions.get(spec.namespace))
        flags = (flag_of(spec.name), *FLAG_ALIASES.get(spec.name, ()))
        if spec.value_type is bool:
            group.add_argument(
                *flags,
                dest=spec.name,
                nargs="?",
                const="true",
                default=argparse.SUPPRESS,
                metavar=_metavar_of(spec),
                help=_help_of(spec),
            )
        else:
            group.add_argument(
                *flags, dest=spec.name, default=argparse.SUPPRESS, metavar=_metavar_of(spec), help=_help_of(spec)
            )
    return p


def parsed_cli(argv: list[str]) -> CliInput:
    """The command line read into leaf texts; LaunchInputError for an unknown flag or a
    missing value, naming the flag and the close matches."""
    p = parser()
    namespace, extras = p.parse_known_args(argv)
    if extras:
        raise LaunchInputError(_unknown_message(extras[0]))
    given = vars(namespace)
    leaves = {name: str(given[name]) for name in leaf_specs(Bags) if name in given}
    return CliInput(
        leaves=leaves,
        config=given.get("config"),
        dump_config=bool(given.get("dump_config")),
        explain=given.get("explain"),
    )


def _unknown_message(token: str) -> str:
    if not token.startswith("-"):
        return f"unexpected argument {token!r}; every value follows its flag (--page-size 16)"
    flag = token.split("=", 1)[0]
    known = [flag_of(n) for n in (*leaf_specs(Bags), *LAUNCH_ONLY)]
    close = difflib.get_close_matches(flag, known, n=3)
    hint = f"; did you mean {', '.join(close)}?" if close else "; see serve --help for the accepted flags"
    return f"unknown flag {flag}{hint}"
