"""device: where the model runs and how it is seeded."""

from __future__ import annotations

from typing import Annotated, Literal

from config_bags.bag import Bag
from config_bags.constraints import NonNegativeInt, PositiveInt
from config_bags.leaf import leaf

DeviceName = Literal["auto", "cpu", "cuda"]


class DeviceBag(Bag, frozen=True, kw_only=True):
    """The compute device and the process-wide random seed."""

    device: Annotated[DeviceName, leaf("Compute device (auto: cuda when available, else cpu).", hot=False)] = "auto"
    random_seed: Annotated[NonNegativeInt, leaf("Seed of the process-wide random generators.", hot=False)] = 0
    cpu_threads: Annotated[
        PositiveInt | None,
        leaf(
            "Torch intra-op threads of each rank on CPU (unset: the cores shared out among this node's ranks).",
            hot=False,
        ),
    ] = None
