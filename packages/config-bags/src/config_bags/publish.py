"""Publishing the bags of this process, and the serving switch that freezes cold leaves."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence

from config_bags.bags import Bags
from config_bags.errors import LeafValueError, NotPublishedError, WireError
from config_bags.invariants import INVARIANTS
from config_bags.roles import ROLE_READS, Role
from config_bags.rules import Rule, check_rules
from config_bags.state import PROCESS, install
from config_bags.wire import decode, encode

logger = logging.getLogger("config_bags")


class RepublishWarning(UserWarning):
    """Bags were published over earlier ones, dropping whatever overrides those carried."""


def publish(bags: Bags, *, role: Role, rules: Sequence[Rule] = ()) -> None:
    """Install `bags` as this process's configuration, read by every accessor from now on.

    The bags must be what `decode(encode(bags))` accepts and must keep config-bags' invariants
    and the stack's own `rules`, which every later `override()` checks too; otherwise
    LeafValueError, and nothing is installed. Publishing again replaces everything (bags, role,
    rules, overrides log, serving state) and warns, naming the overrides it dropped.
    Subscribers registered with `on_override` stay registered.
    """
    if not isinstance(bags, Bags):
        raise TypeError(f"publish() takes a Bags instance, got {type(bags).__name__}")
    if role not in ROLE_READS:
        raise ValueError(f"unknown role {role!r}; accepted: {', '.join(ROLE_READS)}")
    _check_travels(bags)
    all_rules = (*INVARIANTS, *rules)
    check_rules(bags, all_rules)
    if PROCESS.bags is not None:
        dropped = [f"{c.leaf} ({r.source}: {c.old!r} -> {c.new!r})" for r in PROCESS.log for c in r.changes]
        what = "; dropped overrides: " + ", ".join(dropped) if dropped else "; no overrides were dropped"
        warnings.warn(f"publish() replaced the bags published earlier (role {PROCESS.role!r}){what}", RepublishWarning, stacklevel=2)
    PROCESS.role = role
    PROCESS.rules = all_rules
    PROCESS.serving = False
    PROCESS.log = []
    install(bags)
    logger.debug("published bags for role %s (hash %s)", role, PROCESS.hash)


def _check_travels(bags: Bags) -> None:
    """Refuse bags that another process could not decode (a value changed behind the
    construction check, an int msgpack cannot carry)."""
    try:
        decode(encode(bags))
    except (WireError, OverflowError, TypeError) as err:
        raise LeafValueError(f"publish() refused bags that do not survive encode and decode: {err}") from None


def unpublish() -> None:
    """Forget the published bags, role, rules and overrides log (for test teardown and shutdown)."""
    PROCESS.role = None
    PROCESS.rules = ()
    PROCESS.serving = False
    PROCESS.log = []
    install(None)


def is_published() -> bool:
    """Whether this process has published its bags."""
    return PROCESS.bags is not None


def published_bags() -> Bags:
    """The whole published `Bags` root. Raises NotPublishedError before publish()."""
    if PROCESS.bags is None:
        raise NotPublishedError("published_bags() was read before publish(); publish the bags of this process first")
    return PROCESS.bags


def published_role() -> Role:
    """The role this process published as."""
    if PROCESS.role is None:
        raise NotPublishedError("published_role() was read before publish(); publish the bags of this process first")
    return PROCESS.role


def published_rules() -> tuple[Rule, ...]:
    """The rules every override of this process is checked against (config-bags' invariants,
    then the stack's own)."""
    return PROCESS.rules


def begin_serving() -> None:
    """Mark the process as serving: from now on only hot leaves may be overridden."""
    published_bags()
    PROCESS.serving = True


def is_serving() -> bool:
    """Whether `begin_serving()` was called since the last publish."""
    return PROCESS.serving


def config_hash() -> str:
    """A stable hash of the published bags; any override changes it, equal bags give equal hashes."""
    if PROCESS.hash is None:
        raise NotPublishedError("config_hash() was read before publish(); publish the bags of this process first")
    return PROCESS.hash
