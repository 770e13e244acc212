"""Which namespaces each process role reads, and the check that can watch it.

The mode comes from the environment variable `CONFIG_BAGS_ROLE_CHECK` when config_bags is
imported: `off` (default; the accessors carry no check at all), `record` (reads outside the
role's set are remembered in `role_violations()`), or `enforce` (such a read raises).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from enum import Enum
from types import MappingProxyType
from typing import Literal

import msgspec

from config_bags.errors import ConfigError, RoleViolationError

Role = Literal["launcher", "http", "tokenizer", "scheduler", "runner", "detokenizer", "standalone"]

ALL_NAMESPACES: frozenset[str] = frozenset(
    {"schedule", "memory", "model", "parallel", "spec", "exec", "disagg", "mm", "serving", "observability", "device"}
)

ROLE_READS: Mapping[Role, frozenset[str]] = MappingProxyType(
    {
        # The launcher resolves and projects everything; a standalone build (a test, a benchmark)
        # stands in for every role at once.
        "launcher": ALL_NAMESPACES,
        "standalone": ALL_NAMESPACES,
        # The HTTP front end, which also tokenizes (serve runs the two in one process).
        # parallel: it routes each request to a data-parallel replica and hears every rank.
        "http": frozenset({"serving", "model", "parallel", "observability"}),
        "tokenizer": frozenset({"model", "serving", "mm", "observability"}),
        # The scheduler and the runner it drives in the same process.
        # spec: the hybrid attention container picks a target verify's half by speculative_attention_mode.
        # parallel: its rank's slice of the model, its group, and its share of the CPU's threads.
        "scheduler": frozenset({"schedule", "memory", "model", "parallel", "spec", "exec", "device", "observability"}),
        "runner": frozenset({"schedule", "memory", "model", "parallel", "spec", "exec", "device", "observability"}),
        "detokenizer": frozenset({"model", "serving", "observability"}),
    }
)


ENV_VAR = "CONFIG_BAGS_ROLE_CHECK"


class RoleCheckMode(Enum):
    """How reads outside a role's namespaces are treated."""

    OFF = "off"
    RECORD = "record"
    ENFORCE = "enforce"


class RoleViolation(msgspec.Struct, frozen=True):
    """A read of `namespace` by a process whose role does not declare it."""

    role: Role
    namespace: str


def role_check_mode_from_env() -> RoleCheckMode:
    """The mode the environment asks for; an unknown value raises naming the accepted ones."""
    raw = os.environ.get(ENV_VAR, "off").strip().lower()
    try:
        return RoleCheckMode(raw)
    except ValueError:
        accepted = ", ".join(m.value for m in RoleCheckMode)
        raise ConfigError(f"{ENV_VAR}={raw!r} is not a role-check mode; accepted: {accepted}") from None


ROLE_CHECK_MODE: RoleCheckMode = role_check_mode_from_env()

_violations: dict[RoleViolation, None] = {}


def check_role_read(role: Role | None, namespace: str) -> None:
    """Record or refuse a read of `namespace` by `role` (called by accessors unless the mode is off)."""
    if role is None or namespace in ROLE_READS[role]:
        return
    if ROLE_CHECK_MODE is RoleCheckMode.ENFORCE:
        allowed = ", ".join(sorted(ROLE_READS[role]))
        raise RoleViolationError(f"role {role!r} read namespace {namespace!r}; it reads only: {allowed}")
    _violations[RoleViolation(role=role, namespace=namespace)] = None


def role_violations() -> list[RoleViolation]:
    """The distinct out-of-role reads seen in record mode, in the order first seen."""
    return list(_violations)


def clear_role_violations() -> None:
    """Forget the recorded out-of-role reads."""
    _violations.clear()
