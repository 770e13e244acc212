"""What a request allows itself to sample: its logit bias and its grammar's mask, applied to its own
row of the logits before penalties and sampling.

Both are row-local (an addition and a fill of -inf on the request's own row), so a request samples
the same tokens alone or batched. The logprobs a request reports stay those of the model's own
distribution (the sampler computes them from the raw logits).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from runtime_runner.batch import RequestView

_BITS = 32  # tokens per word of a grammar's bitmask


def biased_and_masked(logits: torch.Tensor, requests: Sequence[RequestView]) -> torch.Tensor:
    """`logits` [requests, vocab] with each sampling request's logit bias added and the tokens its
    grammar forbids next set to -inf (the input itself when no request has either). Raises
    ValueError when a request's grammar allows no token, or its bias names a token outside the
    vocabulary (the sampler then fails that request alone)."""
    biased = [i for i, r in enumerate(requests) if r.sample and r.sampling.logit_bias]
    constrained = [i for i, r in enumerate(requests) if r.sample and r.grammar is not None]
    if not biased and not constrained:
        return logits
    logits = logits.clone()
    vocab = logits.shape[1]
    for i in biased:
        ids, values = zip(*requests[i].sampling.logit_bias, strict=True)
        if max(ids) >= vocab:
            raise ValueError(f"logit_bias names token {max(ids)}, outside the vocabulary of {vocab} tokens")
        logits[i, list(ids)] += torch.tensor(values, dtype=logits.dtype, device=logits.device)
    if constrained:
        allowed = allowed_tokens([requests[i] for i in constrained], vocab)
        rows = torch.tensor(constrained, device=logits.device)
        logits[rows] = logits[rows].masked_fill(~allowed.to(logits.device), float("-inf"))
    return logits


def allowed_tokens(requests: Sequence[RequestView], vocab: int) -> torch.Tensor:
    """Bool [requests, vocab]: the tokens each request's grammar allows next. Raises ValueError
    when one allows none (its grammar cannot go on)."""
    bitmask = torch.full((len(requests), (vocab + _BITS - 1) // _BITS), -1, dtype=torch.int32)
    for row, request in enumerate(requests):
        assert request.grammar is not None
        request.grammar.fill_next_token_bitmask(bitmask, row)
    shifts = torch.arange(_BITS, dtype=torch.int32)
    allowed = ((bitmask.unsqueeze(-1) >> shifts) & 1).reshape(len(requests), -1)[:, :vocab].bool()
    stuck = [r.rid for r, ok in zip(requests, allowed.any(dim=1).tolist(), strict=True) if not ok]
    if stuck:
        raise ValueError(
            f"the output constraint of request {stuck[0]!r} allows no next token: its grammar cannot go on "
            "from what was generated"
        )
    return allowed
