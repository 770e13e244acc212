"""A scheduler process joining torch.distributed: the world of every rank of every replica
(gloo on a CPU, NCCL on CUDA, each process on its node's device of its index), its replica's
groups, and the one configuration every rank serves.

Ranks started by different nodes' launchers resolved their own flags, so each checks its bags
against its replica leader's (node 0's): they must agree in every leaf but node_rank, and the
rank then serves the leader's, so every process of the server reports one config hash.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist

import config_bags
import config_bags.server
from config_bags import leaf_specs, leaf_value_of
from config_bags.server import Bags, get_device, get_parallel
from runtime_runner import device_of
from serve.launch_rules import launch_rules
from serve.scheduler_process.placement import RankPlacement
from serve.served_model import ServedModel


@dataclass(frozen=True)
class ReplicaGroups:
    """A replica's groups as one of its ranks sees them: `tensors` for the runner's collectives
    (NCCL on CUDA, gloo on a CPU), `messages` (gloo) for the objects the ranks exchange, and the
    world rank of the replica's first rank."""

    tensors: dist.ProcessGroup
    messages: dist.ProcessGroup
    leader: int


def join_world(placement: RankPlacement) -> ReplicaGroups:
    """Join the world at `placement.init_addr` as `placement`, and answer this rank's replica
    groups. Every rank creates every replica's groups, in the same order, as torch.distributed
    requires of new_group."""
    parallel, tp = get_parallel(), get_parallel().tp_size
    if placement.init_addr is None:
        raise ValueError(f"tp_size = {tp} ranks meet at an address, and this rank was placed without one")
    backend = "gloo"
    if device_of(get_device()).type == "cuda":
        torch.cuda.set_device(placement.local_index)  # "cuda" now names this rank's device
        backend = "nccl"
    dist.init_process_group(
        backend,
        init_method=f"tcp://{placement.init_addr}",
        world_size=parallel.dp_size * tp,
        rank=placement.global_rank,
    )
    mine: ReplicaGroups | None = None
    for replica in range(parallel.dp_size):
        ranks = list(range(replica * tp, (replica + 1) * tp))
        tensors = dist.new_group(ranks, backend=backend)
        messages = tensors if backend == "gloo" else dist.new_group(ranks, backend="gloo")
        if replica == placement.replica:
            mine = ReplicaGroups(tensors, messages, ranks[0])
    assert mine is not None  # placement.replica < dp_size
    return mine


def serve_leaders_bags(groups: ReplicaGroups, leads: bool, model: ServedModel) -> None:
    """Make this rank serve its replica leader's published bags (under the launch's rules for
    `model`), refusing bags that differ in any leaf but node_rank (a node launched with other
    flags) with a ValueError naming each."""
    frames: list[object] = [config_bags.encode(config_bags.published_root_unchecked(Bags)) if leads else None]
    dist.broadcast_object_list(frames, src=groups.leader, group=groups.messages)
    if leads or not isinstance(frames[0], bytes):
        return
    leaders, mine = config_bags.decode(frames[0], config_bags.server.Bags), config_bags.published_root_unchecked(Bags)
    if leaders == mine:
        return
    differing = [
        f"{name} (node 0: {leaf_value_of(leaders, name)!r}, here: {leaf_value_of(mine, name)!r})"
        for name in leaf_specs(Bags)
        if name != "node_rank" and leaf_value_of(leaders, name) != leaf_value_of(mine, name)
    ]
    if differing:
        raise ValueError(
            f"this node's configuration differs from node 0's in {', '.join(differing)}; accepted: every node launched "
            "with the same flags but --node-rank"
        )
    role = config_bags.published_role()
    config_bags.unpublish()  # then publish node 0's: only node_rank differed, and no override was applied yet
    config_bags.publish(leaders, role=role, rules=launch_rules(model))
