"""The bag structs, one module per namespace."""

from config_bags.bags.device import DeviceBag
from config_bags.bags.disagg import DisaggBag
from config_bags.bags.exec import ExecBag, GraphBag, KernelBag, MambaBag, MoeBag, OverlapBag
from config_bags.bags.memory import MemoryBag
from config_bags.bags.mm import MmBag
from config_bags.bags.model import ModelBag
from config_bags.bags.observability import ObservabilityBag
from config_bags.bags.parallel import ParallelBag
from config_bags.bags.root import Bags
from config_bags.bags.schedule import ScheduleBag
from config_bags.bags.serving import ServingBag
from config_bags.bags.spec import SpecBag

__all__ = [
    "Bags",
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
