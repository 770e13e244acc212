"""Building the record from the operator's layers (default < config file < environment < flags)
through config-bags' loader over `Bags`: each leaf the operator set lands in the record with its
provenance and origin; the first bad input is a one-line InputError naming where it was and what
the leaf accepts."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from config_bags import env_var_of as command_env_var_of
from config_bags import load
from config_bags.server import Bags
from serve.record.cli import SERVE_COMMAND
from serve.record.server_args import ServerArgs


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
    return command_env_var_of(SERVE_COMMAND, name)


def launch_request(argv: list[str], environ: Mapping[str, str]) -> LaunchRequest:
    """The record the operator described with `argv`, `environ` and the --config file."""
    loaded = load(SERVE_COMMAND, argv, environ)
    server_args = ServerArgs()
    for name, given in loaded.given.items():
        server_args.put(name, given.value, given.provenance, given.origin)
    return LaunchRequest(server_args=server_args, dump_config=loaded.dump_config, explain=loaded.explain)
