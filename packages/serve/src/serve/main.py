"""`serve`: parse the launch record, resolve it, and launch (or dump / explain it)."""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import NoReturn

INPUT_ERROR_EXIT = 2
ROLE_CHECK_ENV = "CONFIG_BAGS_ROLE_CHECK"


def enforce_role_checks_by_default() -> None:
    """serve runs with role checks enforced: each process reads only its role's namespaces, and a
    read outside them is an error, not a silent coupling. config_bags fixes the mode when it is
    first imported, so the default is set only before that import (spawned children inherit it);
    an operator may still choose "record" or "off" by setting the variable."""
    if "config_bags" not in sys.modules:
        os.environ.setdefault(ROLE_CHECK_ENV, "enforce")


def main(argv: list[str] | None = None) -> int:
    """Parse, resolve and launch (or dump / explain); the exit code. Exit code 2 with one line on
    stderr for any refused input."""
    enforce_role_checks_by_default()
    # Imported here, after the role-check default, since each of these imports config_bags.
    from config_bags import ConfigError
    from serve.port_check import refuse_a_taken_port
    from serve.record import LaunchInputError, launch_request, project, resolve

    args = sys.argv[1:] if argv is None else argv
    try:
        request = launch_request(args, os.environ)
        if request.launches:
            operator = request.operator_bags()
            if operator.parallel.node_rank == 0:  # only node 0 serves HTTP
                refuse_a_taken_port(operator.serving)
        resolved = resolve(request.server_args)
        project(resolved)
    except (LaunchInputError, ConfigError) as err:
        print(f"serve: error: {err}", file=sys.stderr)
        return INPUT_ERROR_EXIT
    if request.dump_config:
        print(json.dumps(resolved.dump(), indent=2))
        return 0
    if request.explain is not None:
        print(resolved.explain(request.explain))
        return 0
    # The process tree is imported only when launching, so --help and --dump-config stay light.
    from serve.launcher import launch

    return launch(resolved)


def run() -> NoReturn:
    """The console script: `main()`, then the process ends at once with its exit code.

    By then the server has stopped its children and said so; what Python's own teardown would add
    is unloading torch and transformers, a second or more on a busy machine between a dead
    scheduler and the server's exit."""
    code = main()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
