"""What every child process does first: die with its parent, publish the bags it was handed
(with the launch's rules), and set up logging, before it constructs anything."""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import sys

import msgspec

import config_bags
import config_bags.server
from config_bags.server import Role, get_observability
from serve.launch_rules import launch_rules
from serve.served_model import ServedModel

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Ask Linux to SIGTERM this process when its parent dies, so no child outlives a killed launcher."""
    if sys.platform != "linux":
        return
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


class Handover(msgspec.Struct, frozen=True, kw_only=True):
    """What the launcher hands each child: the encoded bags it published, and the served model's
    shape, which the launch's rules need."""

    bags: bytes
    model: ServedModel


def publish_received(handover: Handover, role: Role, name: str | None = None) -> None:
    """Publish the bags the launcher handed over, under the launch's rules, so this process
    reports the launcher's hash and refuses what the launcher refuses; its log lines name it
    `name` (serve.process_names; unset: its role)."""
    config_bags.publish(
        config_bags.decode(handover.bags, config_bags.server.Bags), role=role, rules=launch_rules(handover.model)
    )
    configure_logging(name or role)


def configure_logging(role: str) -> None:
    """Log at the published level, each line naming the process role; an override of
    observability.log_level takes effect at once."""
    logging.basicConfig(format=f"%(asctime)s [{role}] %(levelname)s %(name)s: %(message)s", force=True)
    follow_log_level()
    config_bags.on_override(lambda _record: follow_log_level())


def follow_log_level() -> None:
    """Set this process's loggers (uvicorn's too) to the published observability.log_level."""
    level = get_observability().log_level.upper()
    for name in ("", "uvicorn", "uvicorn.error"):
        logging.getLogger(name).setLevel(level)
