"""The batches a draft model worker hands its draft runner: greedy proposal steps, and the extend
that catches the draft up before them. They fit the runner's batch protocol."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from spec_workers.batch_view import ForwardMode


@dataclass(frozen=True)
class GreedySampling:
    """The draft proposes its argmax: a deterministic proposal, which the acceptance test needs."""

    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    repetition_penalty: float = 1.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    logit_bias: tuple[tuple[int, float], ...] = ()


GREEDY = GreedySampling()


@dataclass(frozen=True, kw_only=True)
class DraftBatchRequest:
    """One request's tokens in a draft forward: positions prefix_len .. prefix_len + extend_len - 1."""

    rid: str
    prefix_len: int
    extend_len: int
    page_table: Sequence[int]
    sample: bool
    sampling: GreedySampling
    prompt_ids: Sequence[int]
    output_ids: Sequence[int]
    state_slot: (
        int  # the target request's slot: a hybrid draft keeps its own state in its own pool's slot of that index
    )
    grammar: None = None  # a draft proposes freely (constrained requests are offered no drafts)
    restore_from: int = -1  # a draft catches up from position 0 and keeps no snapshots
    snapshot_to: int = -1


@dataclass(frozen=True, kw_only=True)
class DraftBatch:
    """One draft forward."""

    forward_mode: ForwardMode
    input_ids: Sequence[int]
    positions: Sequence[int]
    out_cache_loc: Sequence[int]
    requests: Sequence[DraftBatchRequest]


def slot_of(page_table: Sequence[int], position: int, page_size: int) -> int:
    """The KV slot of `position` under `page_table`."""
    return page_table[position // page_size] * page_size + position % page_size
