"""The batch one step hands to the model executor.

Its fields are what the runner's batch protocol reads; the two packages never import each other,
the types meet structurally. `page_table` and `output_ids` are the request's own lists, not copies
(copying every page table every step would cost more than the rest of the step): they are exact
while `forward` runs and change after it returns, so an executor must not keep them.
The structs are not tracked by the cycle collector (`gc=False`): they only point at lists and
ints, never back at themselves, and thousands are made per second.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import msgspec

from runtime_scheduler.grammar import TokenGrammar
from runtime_scheduler.request import SamplingParams

# The vocabulary of forwards this package shares with the runner and the attention backends, each
# declaring the same Literal: the types meet structurally.
ForwardMode = Literal["extend", "decode", "mixed", "idle", "target_verify", "draft_extend"]


class BatchRequest(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One request's part of a step: `extend_len` tokens after `prefix_len` already in the pool."""

    rid: str
    prefix_len: int
    extend_len: int
    page_table: Sequence[int]  # pages holding tokens [0, prefix_len + extend_len)
    sample: bool  # False for a prefill chunk that is not the sequence's last
    sampling: SamplingParams
    prompt_ids: Sequence[int]
    output_ids: Sequence[int]
    # A hybrid model's recurrent-state slot of the request (-1: the model keeps none). The state
    # there is the one after its first prefix_len tokens; prefix_len 0 starts from zeros.
    state_slot: int = -1
    # A constrained request's matcher: the runner samples only the tokens it allows next (None: free text)
    grammar: TokenGrammar | None = None
    # A hybrid model's recurrent-state snapshots (kv_memory.py): the snapshot slot whose state is the
    # one after prefix_len tokens, copied into state_slot before the forward (-1: none), and the one
    # the state after this forward is copied into (-1: none).
    restore_from: int = -1
    snapshot_to: int = -1


class ForwardBatch(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One step's work: extends first, then decodes, each request's tokens contiguous."""

    forward_mode: ForwardMode
    input_ids: Sequence[int]
    positions: Sequence[int]
    out_cache_loc: Sequence[int]  # the KV slot each input token is written to
    requests: Sequence[BatchRequest]
