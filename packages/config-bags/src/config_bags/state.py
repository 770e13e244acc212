"""The one published configuration of this process, and the slots the accessors read.

Each namespace accessor reads a closure cell that `install()` rebinds, so a read costs one
call and one cell load; with role checking off (the default) nothing else is on the path.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TypeVar

import msgspec

from config_bags.bags import (
    Bags,
    DeviceBag,
    DisaggBag,
    ExecBag,
    MemoryBag,
    MmBag,
    ModelBag,
    ObservabilityBag,
    ParallelBag,
    ScheduleBag,
    ServingBag,
    SpecBag,
)
from config_bags.errors import NotPublishedError
from config_bags.roles import ROLE_CHECK_MODE, Role, RoleCheckMode, check_role_read
from config_bags.rules import Rule

B = TypeVar("B")


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
        self.bags: Bags | None = None
        self.role: Role | None = None
        self.serving = False
        self.log: list[OverrideRecord] = []
        self.subscribers: list[Callable[[OverrideRecord], None]] = []
        self.hash: str | None = None
        self.rules: tuple[Rule, ...] = ()  # config-bags' invariants and the stack's rules, once published


PROCESS = ProcessConfig()

_setters: list[Callable[[Bags | None], None]] = []


def _slot(namespace: str, pick: Callable[[Bags], B]) -> Callable[[], B]:
    """Build the accessor of one namespace and register the setter that rebinds its cell."""
    current: B | None = None
    unpublished = f"get_{namespace}() was read before publish(); publish the bags of this process first"

    def put(bags: Bags | None) -> None:
        nonlocal current
        current = None if bags is None else pick(bags)

    if ROLE_CHECK_MODE is RoleCheckMode.OFF:

        def get() -> B:
            if current is None:
                raise NotPublishedError(unpublished)
            return current

    else:

        def get() -> B:
            if current is None:
                raise NotPublishedError(unpublished)
            check_role_read(PROCESS.role, namespace)
            return current

    get.__name__ = get.__qualname__ = f"get_{namespace}"
    get.__doc__ = f"The published `{namespace}` bag of this process. Raises NotPublishedError before publish()."
    _setters.append(put)
    return get


get_schedule: Callable[[], ScheduleBag] = _slot("schedule", lambda b: b.schedule)
get_memory: Callable[[], MemoryBag] = _slot("memory", lambda b: b.memory)
get_model: Callable[[], ModelBag] = _slot("model", lambda b: b.model)
get_parallel: Callable[[], ParallelBag] = _slot("parallel", lambda b: b.parallel)
get_spec: Callable[[], SpecBag] = _slot("spec", lambda b: b.spec)
get_exec: Callable[[], ExecBag] = _slot("exec", lambda b: b.exec)
get_disagg: Callable[[], DisaggBag] = _slot("disagg", lambda b: b.disagg)
get_mm: Callable[[], MmBag] = _slot("mm", lambda b: b.mm)
get_serving: Callable[[], ServingBag] = _slot("serving", lambda b: b.serving)
get_observability: Callable[[], ObservabilityBag] = _slot("observability", lambda b: b.observability)
get_device: Callable[[], DeviceBag] = _slot("device", lambda b: b.device)


def hash_of(bags: Bags) -> str:
    """A stable 16-hex-digit hash of `bags` (msgpack encodes struct fields in declaration order)."""
    return hashlib.sha256(msgspec.msgpack.encode(bags)).hexdigest()[:16]


def install(bags: Bags | None) -> None:
    """Make `bags` what every accessor answers (None: unpublished)."""
    PROCESS.bags = bags
    PROCESS.hash = None if bags is None else hash_of(bags)
    for put in _setters:
        put(bags)
