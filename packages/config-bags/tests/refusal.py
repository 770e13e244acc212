"""The check every refused override shares: it raises what it should, and nothing changed (not
the published root, its hash, the log, nor a subscriber's inbox)."""

from __future__ import annotations

from typing import Any

import pytest

import config_bags
from config_bags import OverrideRecord, Root


def assert_refused_changing_nothing(leaves: dict[str, Any], error: type[Exception], message: str) -> None:
    """`override("admin", **leaves)` raises `error` matching `message`, and changes nothing.
    The root is compared whole, as no role acts on it, so it is read without the role check."""
    before = config_bags.published_root_unchecked(Root), config_bags.config_hash(), config_bags.overrides_log()
    heard: list[OverrideRecord] = []
    unsubscribe = config_bags.on_override(heard.append)
    try:
        with pytest.raises(error, match=message):
            config_bags.override("admin", **leaves)
    finally:
        unsubscribe()
    assert (
        config_bags.published_root_unchecked(Root),
        config_bags.config_hash(),
        config_bags.overrides_log(),
    ) == before
    assert heard == []
