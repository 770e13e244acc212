"""How the ranks of one data-parallel replica stay in lockstep: they handle the same messages in
the same order, so every rank's scheduler makes the same decision at every step and every
runner's forward computes its slice of the same batch (the scheduler decides from its messages and
its runner's sampled tokens alone, which the gathered logits make the same on every rank).

The replica's first rank (the leader) alone receives, from the tokenizer manager and the
detokenizer. Every loop iteration it broadcasts the messages it drained, possibly none, over the
replica's message group; every other rank blocks in that broadcast and handles what it carries.
The per-iteration broadcast is also the idle heartbeat: an idle leader polls its inbox for at most
its idle wait before broadcasting, so no rank waits in a collective for longer than that.
Readiness and override acknowledgements go the other way, gathered by the leader, which forwards
them: the other ranks never talk to the front end, so they may run on other nodes.
"""

from __future__ import annotations

import torch.distributed as dist

from serve.ipc.channels import decode, encode
from serve.ipc.messages import Message


class Lockstep:
    """One rank's side of its replica's lockstep (a replica of one rank shares with nobody)."""

    def __init__(self, group: dist.ProcessGroup | None, leader: int, leads: bool) -> None:
        """`group`: the replica's message group (gloo; None for a replica of one rank); `leader`:
        the global rank of its first rank; `leads`: whether this process is that rank."""
        self._group = group
        self._leader = leader
        self.leads = leads

    @classmethod
    def alone(cls) -> Lockstep:
        """A replica of one rank: it handles what it drains, and acknowledges for itself."""
        return cls(None, 0, True)

    def share(self, drained: list[Message]) -> list[Message]:
        """The messages every rank handles this iteration: the leader's `drained`, broadcast by
        the leader and received by the others (whose own `drained` is empty)."""
        if self._group is None:
            return drained
        payload: list[object] = [[encode(message) for message in drained] if self.leads else None]
        dist.broadcast_object_list(payload, src=self._leader, group=self._group)
        frames = payload[0]
        assert isinstance(frames, list)
        return drained if self.leads else [decode(frame) for frame in frames]

    def gather(self, mine: Message) -> list[Message]:
        """Every rank's `mine`, in rank order, at the leader; nothing at the others."""
        if self._group is None:
            return [mine]
        frames: list[object] | None = [None] * dist.get_world_size(self._group) if self.leads else None
        dist.gather_object(encode(mine), frames, dst=self._leader, group=self._group)
        return [decode(frame) for frame in frames if isinstance(frame, bytes)] if frames is not None else []
