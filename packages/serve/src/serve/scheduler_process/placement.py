"""Where each scheduler process sits: its data-parallel replica, its rank in the replica's
tensor-parallel group, and which of its node's processes it is.

The torch.distributed world is every rank of every replica, replica by replica (global rank =
replica * tp_size + rank), spread over the nodes in order: node n runs the world's ranks
n * (world / nnodes) and up. A world exists only with tp_size > 1: a replica of one rank shares
nothing with another.
"""

from __future__ import annotations

import msgspec

from config_bags.server import ParallelBag, get_parallel
from serve.process_names import scheduler_name


class RankPlacement(msgspec.Struct, frozen=True, kw_only=True):
    """One scheduler process's place: its name (serve.process_names), its replica, its
    tensor-parallel rank, its index among its node's scheduler processes (its CUDA device), and
    where the world meets (None: no world)."""

    name: str
    replica: int
    rank: int
    local_index: int
    init_addr: str | None

    @property
    def global_rank(self) -> int:
        """Its rank in the torch.distributed world."""
        return self.replica * get_parallel().tp_size + self.rank

    @property
    def leads(self) -> bool:
        """Whether it is its replica's first rank, which takes the replica's messages."""
        return self.rank == 0


ALONE = RankPlacement(name="scheduler", replica=0, rank=0, local_index=0, init_addr=None)


def ranks_on_node(parallel: ParallelBag, init_addr: str | None) -> tuple[RankPlacement, ...]:
    """The scheduler processes node `parallel.node_rank` runs; `init_addr` is where the world meets."""
    tp, per_node = parallel.tp_size, parallel.dp_size * parallel.tp_size // parallel.nnodes
    first = parallel.node_rank * per_node
    return tuple(
        RankPlacement(
            name=scheduler_name(g // tp, g % tp),
            replica=g // tp,
            rank=g % tp,
            local_index=g - first,
            init_addr=init_addr,
        )
        for g in range(first, first + per_node)
    )
