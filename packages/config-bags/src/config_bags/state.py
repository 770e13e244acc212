"""The one published root of this process, and the hook that tells each accessor about it.

Accessors keep what they answer in their own closure cells; `install()` calls every registered
setter to rebind them, so a read costs one call and one cell load.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

import msgspec

from config_bags.roles import Roles
from config_bags.root import Root
from config_bags.rules import Rule


class LeafChange(msgspec.Struct, frozen=True):
    """One leaf's value before and after an override."""

    leaf: str
    old: object
    new: object


class OverrideRecord(msgspec.Struct, frozen=True):
    """One applied override: who asked, when (unix seconds), and what changed."""

    source: str
    time: float
    changes: tuple[LeafChange, ...]


class ProcessConfig:
    """Everything publish/override keep for this process (one instance, module-level)."""

    def __init__(self) -> None:
        self.bags: Root | None = None
        self.role: str | None = None
        self.roles: Roles | None = None
        self.reads: frozenset[str] = frozenset()  # the namespaces the published role reads
        self.serving = False
        self.log: list[OverrideRecord] = []
        self.subscribers: list[Callable[[OverrideRecord], None]] = []
        self.hash: str | None = None
        self.rules: tuple[Rule, ...] = ()  # the root's invariants and the stack's rules, once published


PROCESS = ProcessConfig()

_setters: list[Callable[[Root | None], None]] = []


def on_install(put: Callable[[Root | None], None]) -> None:
    """Call `put(root)` whenever a root is installed (None: unpublished), so an accessor can
    rebind what it answers."""
    _setters.append(put)
    put(PROCESS.bags)


def hash_of(bags: Root) -> str:
    """A stable 16-hex-digit hash of `bags` (msgpack encodes struct fields in declaration order)."""
    return hashlib.sha256(msgspec.msgpack.encode(bags)).hexdigest()[:16]


def install(bags: Root | None) -> None:
    """Make `bags` what every accessor answers (None: unpublished)."""
    PROCESS.bags = bags
    PROCESS.hash = None if bags is None else hash_of(bags)
    for put in _setters:
        put(bags)
