"""Building the record from the operator's layers: default < config file < environment < flags.

Every value is read and checked against its leaf before the record takes it; the first bad
input raises a one-line LaunchInputError naming where it was (flag, variable, file:line) and
what the leaf accepts.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path

import msgspec

from config_bags import LeafValueError, leaf_specs
from config_bags.server import Bags
from serve.record.cli import CliInput, flag_of, leaf_name_of, parsed_cli
from serve.record.config_file import config_file_entries
from serve.record.errors import LaunchInputError
from serve.record.server_args import ServerArgs
from serve.record.text_values import parsed_text, parsed_value

ENV_PREFIX = "SERVE_"


class LaunchRequest(msgspec.Struct, frozen=True):
    """The unresolved record and what the operator asked the launch to do with it."""

    server_args: ServerArgs
    dump_config: bool
    explain: str | None

    @property
    def launches(self) -> bool:
        """Whether the operator asked to serve (rather than to dump or explain the config)."""
        return not self.dump_config and self.explain is None

    def operator_bags(self) -> Bags:
        """The bags as the operator set them, unresolved: their serving and parallel leaves are
        final (resolution never changes host, port or where the node sits)."""
        return self.server_args.bags()


def env_var_of(name: str) -> str:
    """`page_size` -> `SERVE_PAGE_SIZE`."""
    return ENV_PREFIX + name.upper()


def launch_request(argv: list[str], environ: Mapping[str, str]) -> LaunchRequest:
    """The record the operator described with `argv`, `environ` and the --config file."""
    cli = parsed_cli(argv)
    server_args = ServerArgs()
    if cli.config is not None:
        _apply_file(server_args, Path(cli.config))
    _apply_env(server_args, environ)
    _apply_cli(server_args, cli)
    explain = None if cli.explain is None else _known_leaf(cli.explain, "--explain")
    return LaunchRequest(server_args=server_args, dump_config=cli.dump_config, explain=explain)


def _known_leaf(text: str, where: str) -> str:
    name = leaf_name_of(text)
    if name in leaf_specs(Bags):
        return name
    close = difflib.get_close_matches(name, list(leaf_specs(Bags)), n=3)
    hint = (
        f"did you mean {', '.join(flag_of(c) for c in close)}?" if close else "see serve --help for the accepted flags"
    )
    raise LaunchInputError(f"{where}: unknown flag {text!r}; {hint}")


def _apply_file(server_args: ServerArgs, path: Path) -> None:
    for entry in config_file_entries(path):
        where = f"{path}:{entry.line}" if entry.line else str(path)
        name = _known_leaf(entry.key, f"{where}: key {entry.key!r}")
        try:
            value = parsed_value(leaf_specs(Bags)[name], entry.value)
        except LeafValueError as err:
            raise LaunchInputError(f"{where}: {err}") from None
        server_args.put(name, value, "file", where)


def _apply_env(server_args: ServerArgs, environ: Mapping[str, str]) -> None:
    for var in sorted(v for v in environ if v.startswith(ENV_PREFIX)):
        name = var[len(ENV_PREFIX) :].lower()
        if name not in leaf_specs(Bags):
            close = difflib.get_close_matches(name, list(leaf_specs(Bags)), n=3)
            hint = (
                f"did you mean {', '.join(env_var_of(c) for c in close)}?"
                if close
                else "accepted: SERVE_<FLAG> for a flag of serve --help"
            )
            raise LaunchInputError(f"unknown environment variable {var}; {hint}")
        try:
            value = parsed_text(leaf_specs(Bags)[name], environ[var])
        except LeafValueError as err:
            raise LaunchInputError(f"{var}: {err}") from None
        server_args.put(name, value, "env", var)


def _apply_cli(server_args: ServerArgs, cli: CliInput) -> None:
    for name, text in cli.leaves.items():
        try:
            value = parsed_text(leaf_specs(Bags)[name], text)
        except LeafValueError as err:
            raise LaunchInputError(f"{flag_of(name)}: {err}") from None
        server_args.put(name, value, "cli", f"{flag_of(name)} {text}")
