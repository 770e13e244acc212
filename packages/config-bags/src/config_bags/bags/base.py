"""The base every bag derives from: a frozen, keyword-only msgspec struct."""

from __future__ import annotations

import msgspec


class Bag(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A typed, frozen namespace of leaves. Assigning to a field raises `AttributeError`."""
