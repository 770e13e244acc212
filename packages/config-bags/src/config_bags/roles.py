"""Which namespaces each process role reads, and the check that can watch it.

Roles are data: a stack declares its own `Roles` (on its root, or passed to `publish()`). The mode comes from the
environment variable `CONFIG_BAGS_ROLE_CHECK` when config_bags is imported: `enforce` (the
default: a read outside the role's namespaces raises), `record` (such reads are remembered in
`role_violations()`), or `off` (no read is checked). A root that declares no roles has one role,
`standalone`, reading everything, so enforcing costs it nothing; a root that declares roles gets
them enforced unless the operator chooses otherwise.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable, Mapping
from enum import Enum
from types import MappingProxyType

import msgspec

from config_bags.errors import ConfigError, DefinitionError, RoleViolationError, UnknownRoleError


class Roles:
    """The roles of a stack and the top-level namespaces (fields of its root) each one reads.

        Roles({"engine_core": {"engine"}, "api_server": {"serving"}}, everything=("standalone",))

    A role named in `everything` reads every namespace of whatever root is published, so it
    keeps reading all of them when a stack extends the root with bags of its own. Frozen.
    """

    __slots__ = ("_reads", "_everything")
    _reads: Mapping[str, frozenset[str]]
    _everything: tuple[str, ...]

    def __init__(self, reads: Mapping[str, Collection[str]], *, everything: Iterable[str] = ()) -> None:
        table: dict[str, frozenset[str]] = {}
        for role, namespaces in reads.items():
            if not role or not isinstance(role, str):
                raise DefinitionError(f"a role is a non-empty name, got {role!r}")
            if isinstance(namespaces, str):  # a bare string would read as its letters
                raise DefinitionError(
                    f"role {role!r} reads a collection of namespace names, got the string {namespaces!r}"
                )
            table[role] = frozenset(namespaces)
        every = tuple(dict.fromkeys(everything))
        both = sorted(set(every) & table.keys())
        if both:
            raise DefinitionError(
                f"roles {', '.join(both)} are both listed with namespaces and in everything; name each once"
            )
        if not table and not every:
            raise DefinitionError(
                "Roles needs at least one role: a mapping of role -> namespaces, or everything=(role, ...)"
            )
        object.__setattr__(self, "_reads", MappingProxyType(table))
        object.__setattr__(self, "_everything", every)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Roles is frozen; build a new one instead of setting {name!r}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Roles) and (self._reads, self._everything) == (other._reads, other._everything)

    def __hash__(self) -> int:
        return hash((frozenset(self._reads.items()), self._everything))

    def __repr__(self) -> str:
        reads = {role: sorted(ns) for role, ns in self._reads.items()}
        return f"Roles({reads}, everything={self._everything})"

    @property
    def names(self) -> tuple[str, ...]:
        """Every role in declaration order, those that read everything first."""
        return (*self._everything, *self._reads)

    def reads(self, role: str, namespaces: Collection[str]) -> frozenset[str]:
        """The namespaces `role` reads of a root whose top-level namespaces are `namespaces`.
        Raises UnknownRoleError for a role not declared here, or one that names a namespace the root
        does not have, saying what is accepted."""
        if role in self._everything:
            return frozenset(namespaces)
        if role not in self._reads:
            raise UnknownRoleError(f"unknown role {role!r}; accepted: {', '.join(self.names)}")
        unknown = sorted(self._reads[role] - frozenset(namespaces))
        if unknown:
            raise UnknownRoleError(
                f"role {role!r} reads {', '.join(unknown)}, which the published root does not hold; "
                f"its namespaces: {', '.join(namespaces)}"
            )
        return self._reads[role]


ENV_VAR = "CONFIG_BAGS_ROLE_CHECK"


class RoleCheckMode(Enum):
    """How reads outside a role's namespaces are treated."""

    OFF = "off"
    RECORD = "record"
    ENFORCE = "enforce"


class RoleViolation(msgspec.Struct, frozen=True):
    """A read of `namespace` by a process whose role does not declare it."""

    role: str
    namespace: str


def role_check_mode_from_env() -> RoleCheckMode:
    """The mode the environment asks for; an unknown value raises naming the accepted ones."""
    raw = os.environ.get(ENV_VAR, RoleCheckMode.ENFORCE.value).strip().lower()
    try:
        return RoleCheckMode(raw)
    except ValueError:
        accepted = ", ".join(m.value for m in RoleCheckMode)
        raise ConfigError(f"{ENV_VAR}={raw!r} is not a role-check mode; accepted: {accepted}") from None


ROLE_CHECK_MODE: RoleCheckMode = role_check_mode_from_env()

_violations: dict[RoleViolation, None] = {}


def may_read(role: str | None, reads: frozenset[str], namespace: str) -> bool:
    """Whether a read of `namespace` by `role` (which reads `reads`) needs no check at all: the
    mode is off, nothing is published, or the role reads it. Accessors ask once per publish."""
    return ROLE_CHECK_MODE is RoleCheckMode.OFF or role is None or namespace in reads


def check_role_read(role: str | None, reads: frozenset[str], namespace: str) -> None:
    """Record or refuse a read of `namespace` by `role`, which reads `reads`, as the mode says."""
    if role is None or may_read(role, reads, namespace):
        return
    if ROLE_CHECK_MODE is RoleCheckMode.ENFORCE:
        raise RoleViolationError(
            f"role {role!r} read namespace {namespace!r}; it reads only: {', '.join(sorted(reads))}"
        )
    _violations[RoleViolation(role=role, namespace=namespace)] = None


def role_violations() -> list[RoleViolation]:
    """The distinct out-of-role reads seen in record mode, in the order first seen."""
    return list(_violations)


def clear_role_violations() -> None:
    """Forget the recorded out-of-role reads."""
    _violations.clear()
