"""parallel: how the model is split across devices."""

from __future__ import annotations

from typing import Annotated

from config_bags.bags.base import Bag
from config_bags.constraints import NonNegativeInt, PositiveInt
from config_bags.errors import LeafValueError
from config_bags.leaf import leaf


class ParallelBag(Bag, frozen=True, kw_only=True):
    """Tensor, pipeline and data parallel sizes."""

    tp_size: Annotated[PositiveInt, leaf("Tensor-parallel degree.", hot=False)] = 1
    pp_size: Annotated[PositiveInt, leaf("Pipeline-parallel degree.", hot=False)] = 1
    dp_size: Annotated[PositiveInt, leaf("Data-parallel replicas.", hot=False)] = 1
    nnodes: Annotated[PositiveInt, leaf("Nodes in the deployment.", hot=False)] = 1
    node_rank: Annotated[NonNegativeInt, leaf("This node's rank among nnodes.", hot=False)] = 0

    def check_leaves_together(self) -> None:
        if self.node_rank >= self.nnodes:
            raise LeafValueError(f"ParallelBag.node_rank = {self.node_rank} requires node_rank < nnodes, got nnodes = {self.nnodes}")
