"""What one `forward(batch)` answers."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ForwardOutput:
    """Per request, in batch order: the next token (-1 where the request does not sample this step
    or failed), its logprob (None unless asked), the top-N (token, logprob) pairs (None unless
    asked), why the request failed this step (None unless its sampling raised: the sentence its
    client is told), and the fp32 logits [requests, vocab] at each request's last new token."""

    next_token_ids: tuple[int, ...]
    next_token_logprobs: tuple[float | None, ...]
    top_logprobs: tuple[tuple[tuple[int, float], ...] | None, ...]
    errors: tuple[str | None, ...]
    logits: torch.Tensor
