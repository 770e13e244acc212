"""Finding a taken port before anything slow happens (resolving, converting or loading the model),
so the operator hears at once, in one line, rather than after the model loaded."""

from __future__ import annotations

import socket

from config_bags.server import ServingBag
from serve.record.errors import LaunchInputError


def refuse_a_taken_port(serving: ServingBag) -> None:
    """LaunchInputError when nothing could listen on serving.host:serving.port right now."""
    family = socket.AF_INET6 if ":" in serving.host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no conflict
        try:
            probe.bind((serving.host, serving.port))
        except OSError as err:
            raise LaunchInputError(
                f"port={serving.port} on host={serving.host}: cannot listen there ({err.strerror or err}); "
                "another server may hold it: stop it or choose another with --port"
            ) from None
