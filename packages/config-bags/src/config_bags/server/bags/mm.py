"""mm: multimodal inputs."""

from __future__ import annotations

from typing import Annotated, Literal

from config_bags.bag import Bag
from config_bags.constraints import NonNegativeInt
from config_bags.leaf import leaf

MmFeatureTransport = Literal["inline", "shm"]


class MmBag(Bag, frozen=True, kw_only=True):
    """How multimodal features travel from the tokenizer to the scheduler."""

    mm_feature_transport: Annotated[
        MmFeatureTransport,
        leaf("Carry encoded features inside messages (inline) or in shared memory (shm).", hot=False),
    ] = "inline"
    mm_max_items_per_request: Annotated[
        NonNegativeInt, leaf("Most images or clips one request may carry.", hot=True)
    ] = 8
