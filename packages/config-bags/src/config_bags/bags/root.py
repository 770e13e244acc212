"""The root of all bags: one field per namespace."""

from __future__ import annotations

import msgspec

from config_bags.bags.base import Bag
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


class Bags(Bag, frozen=True, kw_only=True):
    """Every namespace of the process's configuration."""

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
