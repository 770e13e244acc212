"""This server's root of bags: one field per namespace, its roles, its invariants."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from config_bags.bags.device import DeviceBag
from config_bags.bags.disagg import DisaggBag
from config_bags.bags.exec import ExecBag
from config_bags.bags.memory import MemoryBag
from config_bags.bags.mm import MmBag
from config_bags.bags.model import ModelBag
from config_bags.bags.observability import ObservabilityBag
from config_bags.bags.parallel import ParallelBag
from config_bags.bags.schedule import ScheduleBag
from config_bags.bags.serving import ServingBag
from config_bags.bags.spec import SpecBag
from config_bags.roles import SERVER_ROLES, Roles
from config_bags.root import Root
from config_bags.rules import Rule


class Bags(Root, frozen=True, kw_only=True):
    """Every namespace of this server's configuration. A stack extends it with bags of its own
    by subclassing (`class MyBags(Bags, frozen=True, kw_only=True): engine: EngineBag = ...`)."""

    ROLES: ClassVar[Roles] = SERVER_ROLES

    schedule: ScheduleBag = msgspec.field(default_factory=ScheduleBag)
    memory: MemoryBag = msgspec.field(default_factory=MemoryBag)
    model: ModelBag = msgspec.field(default_factory=ModelBag)
    parallel: ParallelBag = msgspec.field(default_factory=ParallelBag)
    spec: SpecBag = msgspec.field(default_factory=SpecBag)
    exec: ExecBag = msgspec.field(default_factory=ExecBag)
    disagg: DisaggBag = msgspec.field(default_factory=DisaggBag)
    mm: MmBag = msgspec.field(default_factory=MmBag)
    serving: ServingBag = msgspec.field(default_factory=ServingBag)
    observability: ObservabilityBag = msgspec.field(default_factory=ObservabilityBag)
    device: DeviceBag = msgspec.field(default_factory=DeviceBag)

    @classmethod
    def invariants(cls) -> tuple[Rule, ...]:
        """config-bags' own cross-bag invariants (`config_bags.invariants`)."""
        # Imported here: the invariants read these bags through config_bags.derived, which
        # imports this package, so a module-level import would be circular.
        from config_bags.invariants import INVARIANTS

        return INVARIANTS
