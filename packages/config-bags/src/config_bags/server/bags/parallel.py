"""parallel: how the model is split across processes and machines."""

from __future__ import annotations

from typing import Annotated

import msgspec

from config_bags.bag import Bag
from config_bags.constraints import NonNegativeInt, PositiveInt
from config_bags.errors import LeafValueError
from config_bags.leaf import leaf

# host:port, the host a name, an IPv4 address or a bracketed IPv6 address
HostPort = Annotated[str, msgspec.Meta(pattern=r"^(\[[0-9A-Fa-f:.]+\]|[^\s:\[\]]+):[0-9]{1,5}$", title="host:port")]


class ParallelBag(Bag, frozen=True, kw_only=True):
    """Tensor, pipeline and data parallel sizes, and where the ranks of every node meet."""

    tp_size: Annotated[
        PositiveInt, leaf("Tensor-parallel degree: ranks that each hold a slice of the model.", hot=False)
    ] = 1
    pp_size: Annotated[PositiveInt, leaf("Pipeline-parallel degree.", hot=False)] = 1
    dp_size: Annotated[
        PositiveInt, leaf("Data-parallel replicas, each with its own scheduler, runner(s) and KV pool.", hot=False)
    ] = 1
    nnodes: Annotated[PositiveInt, leaf("Nodes in the deployment.", hot=False)] = 1
    node_rank: Annotated[NonNegativeInt, leaf("This node's rank among nnodes (node 0 serves HTTP).", hot=False)] = 0
    dist_init_addr: Annotated[
        HostPort | None,
        leaf(
            "host:port of node 0 where every rank meets to start torch.distributed (unset: a free local port; needed "
            "when nnodes > 1).",
            hot=False,
        ),
    ] = None

    def check_leaves_together(self) -> None:
        if self.node_rank >= self.nnodes:
            raise LeafValueError(
                f"ParallelBag.node_rank = {self.node_rank} requires node_rank < nnodes, got nnodes = {self.nnodes}"
            )
        if self.nnodes > 1 and self.dist_init_addr is None:
            raise LeafValueError(
                f"ParallelBag.nnodes = {self.nnodes} > 1 requires dist_init_addr (host:port of node 0, the same on "
                "every node), got none"
            )
        if self.dist_init_addr is not None and not 1 <= int(self.dist_init_addr.rsplit(":", 1)[1]) <= 65535:
            raise LeafValueError(
                f"ParallelBag.dist_init_addr = {self.dist_init_addr!r} is not accepted; accepted: host:port with a "
                "port of 1 to 65535"
            )
