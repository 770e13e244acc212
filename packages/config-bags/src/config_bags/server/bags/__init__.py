"""This server's bag structs, one module per namespace."""

from config_bags.server.bags.device import DeviceBag
from config_bags.server.bags.disagg import DisaggBag
from config_bags.server.bags.exec import ExecBag, GraphBag, KernelBag, MambaBag, MoeBag, OverlapBag
from config_bags.server.bags.memory import MemoryBag
from config_bags.server.bags.mm import MmBag
from config_bags.server.bags.model import ModelBag
from config_bags.server.bags.observability import ObservabilityBag
from config_bags.server.bags.parallel import ParallelBag
from config_bags.server.bags.schedule import ScheduleBag
from config_bags.server.bags.serving import ServingBag
from config_bags.server.bags.spec import SpecBag

__all__ = [
    "DeviceBag",
    "DisaggBag",
    "ExecBag",
    "GraphBag",
    "KernelBag",
    "MambaBag",
    "MemoryBag",
    "MmBag",
    "ModelBag",
    "MoeBag",
    "ObservabilityBag",
    "OverlapBag",
    "ParallelBag",
    "ScheduleBag",
    "ServingBag",
    "SpecBag",
]
