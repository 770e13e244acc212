"""What one `forward(batch)` answers."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class PositionSamples:
    """A verify request's samples, one per input token: the token the target draws at position i
    as if the request's first i drafts were already its output (penalties and a seed's step
    counted so), with its logprob and top-N alternatives where the request asked."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float | None, ...]
    top_logprobs: tuple[tuple[tuple[int, float], ...] | None, ...]


@dataclass(frozen=True)
class ForwardOutput:
    """Per request, in batch order: the next token (-1 where the request does not sample this step
    or failed), its logprob (None unless asked), the top-N (token, logprob) pairs (None unless
    asked), why the request failed this step (None unless its sampling raised: the sentence its
    client is told), and the fp32 logits [requests, vocab] at each request's last new token.
    A target_verify forward also answers `verified`, each request's samples at every position
    (its next token is then the last of them); other forwards answer None there."""

    next_token_ids: tuple[int, ...]
    next_token_logprobs: tuple[float | None, ...]
    top_logprobs: tuple[tuple[tuple[int, float], ...] | None, ...]
    errors: tuple[str | None, ...]
    logits: torch.Tensor
    verified: tuple[PositionSamples, ...] | None = None
