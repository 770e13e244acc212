"""Publishing the bags of this process, and the serving switch that freezes cold leaves."""

from __future__ import annotations

import logging
import warnings

from config_bags.bags import Bags
from config_bags.errors import NotPublishedError
from config_bags.roles import ROLE_READS, Role
from config_bags.state import PROCESS, install

logger = logging.getLogger("config_bags")


class RepublishWarning(UserWarning):
    """Bags were published over earlier ones, dropping whatever overrides those carried."""


def publish(bags: Bags, *, role: Role) -> None:
    """Install `bags` as this process's configuration, read by every accessor from now on.

    Publishing again replaces everything (bags, role, overrides log, serving state) and warns,
    naming the overrides it dropped. Subscribers registered with `on_override` stay registered.
    """
    if not isinstance(bags, Bags):
        raise TypeError(f"publish() takes a Bags instance, got {type(bags).__name__}")
    if role not in ROLE_READS:
        raise ValueError(f"unknown role {role!r}; accepted: {', '.join(ROLE_READS)}")
    if PROCESS.bags is not None:
        dropped = [f"{c.leaf} ({r.source}: {c.old!r} -> {c.new!r})" for r in PROCESS.log for c in r.changes]
        what = "; dropped overrides: " + ", ".join(dropped) if dropped else "; no overrides were dropped"
        warnings.warn(f"publish() replaced the bags published earlier (role {PROCESS.role!r}){what}", RepublishWarning, stacklevel=2)
    PROCESS.role = role
    PROCESS.serving = False
    PROCESS.log = []
    install(bags)
    logger.debug("published bags for role %s (hash %s)", role, PROCESS.hash)


def unpublish() -> None:
    """Forget the published bags, role and overrides log (for test teardown and shutdown)."""
    PROCESS.role = None
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
