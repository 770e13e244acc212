"""This server's named accessors: one per namespace of `Bags`, each `accessor()` over it.

They answer for any published root that is a `Bags`, a stack's extension of it included.
"""

from __future__ import annotations

from collections.abc import Callable

from config_bags.accessors import accessor
from config_bags.server.bags import (
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
from config_bags.server.root import Bags

get_schedule: Callable[[], ScheduleBag] = accessor(Bags, "schedule", lambda b: b.schedule)
get_memory: Callable[[], MemoryBag] = accessor(Bags, "memory", lambda b: b.memory)
get_model: Callable[[], ModelBag] = accessor(Bags, "model", lambda b: b.model)
get_parallel: Callable[[], ParallelBag] = accessor(Bags, "parallel", lambda b: b.parallel)
get_spec: Callable[[], SpecBag] = accessor(Bags, "spec", lambda b: b.spec)
get_exec: Callable[[], ExecBag] = accessor(Bags, "exec", lambda b: b.exec)
get_disagg: Callable[[], DisaggBag] = accessor(Bags, "disagg", lambda b: b.disagg)
get_mm: Callable[[], MmBag] = accessor(Bags, "mm", lambda b: b.mm)
get_serving: Callable[[], ServingBag] = accessor(Bags, "serving", lambda b: b.serving)
get_observability: Callable[[], ObservabilityBag] = accessor(Bags, "observability", lambda b: b.observability)
get_device: Callable[[], DeviceBag] = accessor(Bags, "device", lambda b: b.device)
