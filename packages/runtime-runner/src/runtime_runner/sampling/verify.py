"""Sampling a target_verify forward: every input token's position is sampled, each as the request
would stand after its first i drafts, so a verify scores a token exactly as a decode step would.

A verify request's input tokens are its last accepted token and its drafts d1..dk; the logits at
input i are the target's next-token distribution after d1..di. Sampling position i as a request
whose output so far ends in d1..di gives it the penalties and the seeded step (a seed's noise is
keyed by how many tokens were generated) of the decode step that would have produced that token:
a greedy or seeded request draws the very token it would have drawn without speculation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from runtime_runner.batch import ForwardBatchView, RequestView, SamplingView, TokenGrammar
from runtime_runner.output import ForwardOutput, PositionSamples
from runtime_runner.sampling.sampler import sample


@dataclass(frozen=True)
class _PositionRequest:
    """One verify position as a request of its own (fits RequestView)."""

    rid: str
    prefix_len: int
    extend_len: int
    page_table: Sequence[int]
    sample: bool
    sampling: SamplingView
    prompt_ids: Sequence[int]
    output_ids: Sequence[int]
    state_slot: int
    grammar: TokenGrammar | None
    restore_from: int = -1  # a verify position restores and keeps no snapshot
    snapshot_to: int = -1


def _positions_of(request: RequestView, drafts: Sequence[int]) -> list[_PositionRequest]:
    if request.grammar is not None and drafts:
        # Its matcher stands before the first position: the drafts' positions have none to mask by.
        raise ValueError(
            f"request {request.rid!r} is constrained and carries drafts; accepted: none (it decodes plainly)"
        )
    base = list(request.output_ids)
    return [
        _PositionRequest(
            request.rid,
            request.prefix_len + i,
            1,
            request.page_table,
            True,
            request.sampling,
            request.prompt_ids,
            base + list(drafts[:i]),
            request.state_slot,
            request.grammar,
        )
        for i in range(len(drafts) + 1)
    ]


def sample_verify(logits: torch.Tensor, batch: ForwardBatchView, generator: torch.Generator) -> ForwardOutput:
    """Sample every position of a target_verify batch from `logits` [tokens, vocab] (fp32, one row
    per input token). A request fails when any of its positions' sampling fails alone."""
    rows: list[_PositionRequest] = []
    start = 0
    for request in batch.requests:
        drafts = batch.input_ids[start + 1 : start + request.extend_len]
        rows.extend(_positions_of(request, drafts))
        start += request.extend_len
    sampled = sample(logits, rows, generator)
    verified: list[PositionSamples] = []
    errors: list[str | None] = []
    start = 0
    for request in batch.requests:
        span = slice(start, start + request.extend_len)
        verified.append(PositionSamples(sampled.token_ids[span], sampled.logprobs[span], sampled.top_logprobs[span]))
        errors.append(next((e for e in sampled.errors[span] if e is not None), None))
        start += request.extend_len
    last = torch.cumsum(torch.tensor([r.extend_len for r in batch.requests]), 0) - 1
    return ForwardOutput(
        next_token_ids=tuple(-1 if e is not None else v.token_ids[-1] for v, e in zip(verified, errors, strict=True)),
        next_token_logprobs=tuple(v.logprobs[-1] for v in verified),
        top_logprobs=tuple(v.top_logprobs[-1] for v in verified),
        errors=tuple(errors),
        logits=logits.index_select(0, last.to(logits.device)),
        verified=tuple(verified),
    )
