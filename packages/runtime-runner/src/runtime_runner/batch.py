"""The batch the runner accepts, declared as protocols: any object with these attributes fits.

The scheduler's batch satisfies these structurally; the two packages never import each other.
Read-only properties are used so that plain attributes, frozen structs and properties all fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol

import torch

# The scheduler's, the backends' and this package's vocabulary of forwards, each declaring the same
# Literal: the types meet structurally, as the packages never import each other.
ForwardMode = Literal["extend", "decode", "mixed", "idle", "target_verify", "draft_extend"]

# The modes a runner computes: target_verify scores a request's drafts (every position samples),
# draft_extend is a draft runner's extend; idle, a data-parallel rank's empty step, is not run here.
SERVED_FORWARD_MODES: tuple[ForwardMode, ...] = ("extend", "decode", "mixed", "target_verify", "draft_extend")


class SamplingView(Protocol):
    """One request's sampling parameters."""

    @property
    def temperature(self) -> float: ...  # 0 means greedy
    @property
    def top_p(self) -> float: ...  # 1.0 disables
    @property
    def top_k(self) -> int: ...  # -1 disables
    @property
    def min_p(self) -> float: ...  # 0.0 disables
    @property
    def repetition_penalty(self) -> float: ...  # 1.0 disables; over prompt and output tokens
    @property
    def frequency_penalty(self) -> float: ...  # 0.0 disables; over output tokens
    @property
    def presence_penalty(self) -> float: ...  # 0.0 disables; over output tokens
    @property
    def seed(self) -> int | None: ...  # same seed, same tokens
    @property
    def logprobs(self) -> bool: ...  # report the chosen token's logprob
    @property
    def top_logprobs(self) -> int: ...  # how many alternatives to report (0: none)
    @property
    def logit_bias(self) -> Sequence[tuple[int, float]]: ...  # (token id, bias) added to the logits before sampling


class TokenGrammar(Protocol):
    """A constrained request's matcher, as the sampler reads it (xgrammar's GrammarMatcher fits)."""

    def fill_next_token_bitmask(self, bitmask: torch.Tensor, index: int) -> bool:
        """Write the tokens allowed next into row `index` of `bitmask` (int32 [rows, ceil(vocab / 32)],
        bit t % 32 of word t // 32 set when token t is allowed)."""
        ...


class RequestView(Protocol):
    """One request's part of a batch."""

    @property
    def rid(self) -> str: ...
    @property
    def prefix_len(self) -> int: ...  # tokens whose KV is already in the pool before this step
    @property
    def extend_len(self) -> int: ...  # tokens computed this step (1 for a decode; 1 + drafts for a verify)
    @property
    def page_table(self) -> Sequence[int]: ...  # pages holding tokens [0, prefix_len + extend_len)
    @property
    def sample(self) -> bool: ...  # False for a prefill chunk that is not the prompt's last
    @property
    def sampling(self) -> SamplingView: ...
    @property
    def prompt_ids(self) -> Sequence[int]: ...
    @property
    def output_ids(self) -> Sequence[int]: ...  # tokens generated so far (penalties, seeded steps)
    @property
    def state_slot(self) -> int: ...  # a hybrid model's recurrent-state slot (-1 for a model without one)
    @property
    def grammar(self) -> TokenGrammar | None: ...  # sample only what it allows next (None: free text)
    @property
    def restore_from(self) -> int: ...  # a hybrid's snapshot slot holding its state after prefix_len tokens (-1: none)
    @property
    def snapshot_to(self) -> int: ...  # a hybrid's snapshot slot to keep its state after this forward in (-1: none)


class ForwardBatchView(Protocol):
    """What one `forward(batch)` computes: the new tokens of each request, request by request."""

    @property
    def forward_mode(self) -> ForwardMode: ...
    @property
    def input_ids(self) -> Sequence[int]: ...  # sum of extend_len tokens, in request order
    @property
    def positions(self) -> Sequence[int]: ...  # position of each input token in its sequence
    @property
    def out_cache_loc(self) -> Sequence[int]: ...  # KV slot each input token is written to
    @property
    def requests(self) -> Sequence[RequestView]: ...
