"""The published root read as this server's `Bags`."""

from __future__ import annotations

from config_bags.publish import published_root
from config_bags.server.root import Bags


def published_bags() -> Bags:
    """The whole published `Bags` root (a stack's extension of it included), role-checked as
    `published_root()` is. Raises NotPublishedError before publish(), WrongRootError when the
    published root is not a `Bags`."""
    return published_root(Bags)
