"""Publishing the root of bags of this process with its role, and the serving switch that
freezes cold leaves."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Collection, Mapping, Sequence
from typing import TypeVar, overload

from config_bags.errors import DefinitionError, LeafValueError, NotPublishedError, WireError, WrongRootError
from config_bags.roles import Roles, check_role_read
from config_bags.root import Root
from config_bags.rules import Rule, check_rules
from config_bags.schema import leaf_specs, root_fields
from config_bags.state import PROCESS, install
from config_bags.wire import decode, encode

R = TypeVar("R", bound=Root)

logger = logging.getLogger("config_bags")


class RepublishWarning(UserWarning):
    """Bags were published over earlier ones, dropping whatever overrides those carried."""


def publish(
    bags: Root, *, role: str, rules: Sequence[Rule] = (), roles: Roles | Mapping[str, Collection[str]] | None = None
) -> None:
    """Install the root `bags` (any stack's `Root`) as this process's
    configuration, read by every accessor from now on, for the process role `role`.

    `roles` says which namespaces each role reads (a `Roles`, or a mapping of role -> top-level
    namespaces); by default the root's own `ROLES`. The root must be what
    `decode(encode(bags), type(bags))` accepts and must keep its root's `invariants()` and the
    stack's own `rules`, which every later `override()` checks too; otherwise LeafValueError, and
    nothing is installed. The root's invariants travel with its type, so a process that publishes
    decoded bytes keeps them without being told. Publishing again replaces everything (root, role, rules, overrides log,
    serving state) and warns, naming the overrides it dropped. Subscribers registered with
    `on_override` stay registered.
    """
    if not isinstance(bags, Root):
        raise DefinitionError(
            f"publish() takes a root of bags (an instance of a config_bags.Root subclass), got {type(bags).__name__}"
        )
    leaf_specs(type(bags))  # two bags declaring one leaf name: refused here if not at definition
    table = type(bags).ROLES if roles is None else roles if isinstance(roles, Roles) else Roles(roles)
    reads = table.reads(role, tuple(root_fields(type(bags))))
    _check_travels(bags)
    all_rules = (*type(bags).invariants(), *rules)
    check_rules(bags, all_rules)
    if PROCESS.bags is not None:
        dropped = [f"{c.leaf} ({r.source}: {c.old!r} -> {c.new!r})" for r in PROCESS.log for c in r.changes]
        what = "; dropped overrides: " + ", ".join(dropped) if dropped else "; no overrides were dropped"
        warnings.warn(
            f"publish() replaced the bags published earlier (role {PROCESS.role!r}){what}",
            RepublishWarning,
            stacklevel=2,
        )
    PROCESS.role = role
    PROCESS.roles = table
    PROCESS.reads = reads
    PROCESS.rules = all_rules
    PROCESS.serving = False
    PROCESS.log = []
    install(bags)
    logger.debug("published bags for role %s (hash %s)", role, PROCESS.hash)


def _check_travels(bags: Root) -> None:
    """Refuse bags that another process could not decode (a value changed behind the
    construction check, an int msgpack cannot carry)."""
    try:
        decode(encode(bags), type(bags))
    except (WireError, OverflowError, TypeError) as err:
        raise LeafValueError(f"publish() refused bags that do not survive encode and decode: {err}") from None


def unpublish() -> None:
    """Forget the published bags, role, rules and overrides log (for test teardown and shutdown)."""
    PROCESS.role = None
    PROCESS.roles = None
    PROCESS.reads = frozenset()
    PROCESS.rules = ()
    PROCESS.serving = False
    PROCESS.log = []
    install(None)


def is_published() -> bool:
    """Whether this process has published its bags."""
    return PROCESS.bags is not None


@overload
def published_root() -> Root: ...


@overload
def published_root(root_type: type[R]) -> R: ...


def published_root(root_type: type[Root] = Root) -> Root:
    """The whole published root, checked to be a `root_type` (any root by default). A read of
    every namespace, so it goes through the role check for each one the role does not read.
    Raises NotPublishedError before publish(), WrongRootError when the published root is another
    type, RoleViolationError when enforcing and the role does not read every namespace."""
    return _read_whole(_published_as(root_type, "published_root()"))


def published_root_unchecked(root_type: type[R]) -> R:
    """The whole published root with no role check: for shipping it to another process,
    comparing or showing it whole (a diagnostic dump), or checking a candidate change, never
    for acting on its values, which a role reads through `bag()`, an accessor or
    `published_root()`. Raises as `published_root()` does otherwise."""
    return _published_as(root_type, "published_root_unchecked()")


def _read_whole(root: R) -> R:
    for namespace in root_fields(type(root)):
        check_role_read(PROCESS.role, PROCESS.reads, namespace)
    return root


def _published_as(root_type: type[R], what: str) -> R:
    root = PROCESS.bags
    if root is None:
        raise NotPublishedError(f"{what} was read before publish(); publish the bags of this process first")
    if not isinstance(root, root_type):
        raise WrongRootError(
            f"{what} asked for a {root_type.__name__}, but the published root is {type(root).__name__}"
        )
    return root


def published_role() -> str:
    """The role this process published as."""
    if PROCESS.role is None:
        raise NotPublishedError("published_role() was read before publish(); publish the bags of this process first")
    return PROCESS.role


def published_roles() -> Roles:
    """The roles table the process published with (the root's `ROLES` unless `publish()` was
    given others)."""
    if PROCESS.roles is None:
        raise NotPublishedError("published_roles() was read before publish(); publish the bags of this process first")
    return PROCESS.roles


def published_rules() -> tuple[Rule, ...]:
    """The rules every override of this process is checked against (the root's invariants,
    then the stack's own)."""
    return PROCESS.rules


def begin_serving() -> None:
    """Mark the process as serving: from now on only hot leaves may be overridden."""
    published_root_unchecked(Root)
    PROCESS.serving = True


def is_serving() -> bool:
    """Whether `begin_serving()` was called since the last publish."""
    return PROCESS.serving


def config_hash() -> str:
    """A stable hash of the published bags; any override changes it, equal bags give equal hashes."""
    if PROCESS.hash is None:
        raise NotPublishedError("config_hash() was read before publish(); publish the bags of this process first")
    return PROCESS.hash
