"""Which data-parallel replica serves a request: the one with the fewest outstanding tokens,
counting a prompt prefix it was recently sent as already done there.

A replica's outstanding tokens are, over the requests in flight there, each one's prompt and
max_new_tokens less the tokens it has produced. A prompt is hashed in chained blocks of
`PREFIX_BLOCK` tokens, and the replica each chain was last sent to is remembered (the last
`REMEMBERED_PREFIXES` chains); a replica that was sent a request's first k blocks counts k blocks
fewer tokens for it. A shared prefix (a system prompt, a chat history) so draws its requests to
the replica whose prefix cache probably holds it, until that replica is busier than another by
more than the prefix would save. The replica's cache is never asked (it evicts on its own): the
guess costs one hash per block of each prompt.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from config_bags.server import get_parallel

PREFIX_BLOCK = 16
REMEMBERED_PREFIXES = 8192


def prefix_chain(prompt_ids: Sequence[int]) -> list[int]:
    """The hash of each whole block-aligned prefix of the prompt, shortest first."""
    chain, hashes = 0, []
    for start in range(0, len(prompt_ids) - PREFIX_BLOCK + 1, PREFIX_BLOCK):
        chain = hash((chain, tuple(prompt_ids[start : start + PREFIX_BLOCK])))
        hashes.append(chain)
    return hashes


class ReplicaRouter:
    """Routes requests over parallel.dp_size replicas and tracks what each has outstanding."""

    def __init__(self) -> None:
        self._outstanding: dict[int, int] = {}
        self._in_flight: dict[str, tuple[int, int]] = {}  # rid -> (replica, its tokens still counted)
        self._prefixes: OrderedDict[int, int] = OrderedDict()  # prefix chain hash -> replica last sent it

    def outstanding(self) -> list[int]:
        """Outstanding tokens of each replica, by replica."""
        return [self._outstanding.get(replica, 0) for replica in range(get_parallel().dp_size)]

    def route(self, rid: str, prompt_ids: Sequence[int], max_new_tokens: int) -> int:
        """The replica to serve request `rid`, counted as in flight there until `finished(rid)`."""
        chain = prefix_chain(prompt_ids)
        cached: dict[int, int] = {}  # replica -> tokens of the prompt's longest prefix it was sent
        for depth, prefix in enumerate(chain, 1):
            holder = self._prefixes.get(prefix)
            if holder is None:
                break
            cached[holder] = depth * PREFIX_BLOCK
        load = self.outstanding()
        replica = min(range(len(load)), key=lambda r: (load[r] - cached.get(r, 0), r))
        tokens = len(prompt_ids) + max_new_tokens
        self._outstanding[replica] = load[replica] + tokens
        self._in_flight[rid] = (replica, tokens)
        for prefix in chain:
            self._prefixes[prefix] = replica
            self._prefixes.move_to_end(prefix)
        while len(self._prefixes) > REMEMBERED_PREFIXES:
            self._prefixes.popitem(last=False)
        return replica

    def produced(self, rid: str, tokens: int) -> None:
        """Request `rid` produced `tokens` more output tokens."""
        entry = self._in_flight.get(rid)
        if entry is not None:
            replica, left = entry
            done = min(tokens, left)
            self._in_flight[rid] = (replica, left - done)
            self._outstanding[replica] -= done

    def finished(self, rid: str) -> None:
        """Request `rid` left its replica (finished, aborted or failed)."""
        entry = self._in_flight.pop(rid, None)
        if entry is not None:
            self._outstanding[entry[0]] -= entry[1]
