"""What the workers read of the scheduler's offers and batches and of the runners' answers,
declared as protocols: runtime_scheduler's and runtime_runner's types fit them structurally (the
packages never import each other).

A worker reads a batch's requests only to hand the batch on to its target runner, so BatchView and
its RequestView, SamplingView and TokenGrammar name exactly what the runner reads: with one field
fewer the runner no longer fits as the target (tests/test_runtime_seams.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

# The vocabulary of forwards this package shares with the scheduler, the runner and the attention
# backends, each declaring the same Literal: the types meet structurally.
ForwardMode = Literal["extend", "decode", "mixed", "idle", "target_verify", "draft_extend"]


class DraftOffer(Protocol):
    """A decoding request offered drafts (runtime_scheduler.DraftRequest fits)."""

    @property
    def rid(self) -> str: ...
    @property
    def kv_len(self) -> int: ...  # tokens with KV; the last token sits at position kv_len
    @property
    def max_drafts(self) -> int: ...
    @property
    def page_table(self) -> Sequence[int]: ...  # covers positions [0, kv_len + max_drafts]
    @property
    def prompt_ids(self) -> Sequence[int]: ...
    @property
    def output_ids(self) -> Sequence[int]: ...
    @property
    def state_slot(self) -> int: ...  # a hybrid model's recurrent-state slot (-1 without one)


class SamplingView(Protocol):
    """A request's sampling parameters, as the runner reads them."""

    @property
    def temperature(self) -> float: ...
    @property
    def top_p(self) -> float: ...
    @property
    def top_k(self) -> int: ...
    @property
    def min_p(self) -> float: ...
    @property
    def repetition_penalty(self) -> float: ...
    @property
    def frequency_penalty(self) -> float: ...
    @property
    def presence_penalty(self) -> float: ...
    @property
    def seed(self) -> int | None: ...
    @property
    def logprobs(self) -> bool: ...
    @property
    def top_logprobs(self) -> int: ...
    @property
    def logit_bias(self) -> Sequence[tuple[int, float]]: ...


class TokenGrammar(Protocol):
    """A constrained request's matcher, as the runner reads it (the bitmask is its int32 tensor)."""

    def fill_next_token_bitmask(self, bitmask: Any, index: int) -> bool: ...


class RequestView(Protocol):
    """One request's part of a batch."""

    @property
    def rid(self) -> str: ...
    @property
    def prefix_len(self) -> int: ...
    @property
    def extend_len(self) -> int: ...
    @property
    def page_table(self) -> Sequence[int]: ...
    @property
    def sample(self) -> bool: ...
    @property
    def sampling(self) -> SamplingView: ...
    @property
    def prompt_ids(self) -> Sequence[int]: ...
    @property
    def output_ids(self) -> Sequence[int]: ...
    @property
    def state_slot(self) -> int: ...  # a hybrid model's recurrent-state slot (-1 without one)
    @property
    def grammar(self) -> TokenGrammar | None: ...  # a constrained request's matcher (None: free text)
    @property
    def restore_from(self) -> int: ...  # a hybrid's snapshot slot to resume from (-1: none)
    @property
    def snapshot_to(self) -> int: ...  # a hybrid's snapshot slot to keep its state in (-1: none)


class BatchView(Protocol):
    """One forward's batch (the scheduler's ForwardBatch fits; so do the draft batches)."""

    @property
    def forward_mode(self) -> ForwardMode: ...
    @property
    def input_ids(self) -> Sequence[int]: ...
    @property
    def positions(self) -> Sequence[int]: ...
    @property
    def out_cache_loc(self) -> Sequence[int]: ...
    @property
    def requests(self) -> Sequence[RequestView]: ...


class OutputView(Protocol):
    """What a worker reads of a forward's answer (the runner's ForwardOutput fits): a draft's next
    tokens. The target's answer goes back to the scheduler as it is, typed by the target runner."""

    @property
    def next_token_ids(self) -> Sequence[int]: ...
