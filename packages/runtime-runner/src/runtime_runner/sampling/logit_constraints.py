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
from runtime_runner.sampling.forbidden_tokens import mask_forbidden, masks_natively

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
        bitmask = grammar_bitmask([requests[i] for i in constrained], vocab)
        if masks_natively(logits):
            any_allowed = mask_forbidden(logits, constrained, bitmask)
        else:
            allowed = _unpacked(bitmask, vocab).to(logits.device)
            rows = torch.tensor(constrained, device=logits.device)
            logits[rows] = logits[rows].masked_fill(~allowed, float("-inf"))
            any_allowed = allowed.any(dim=1).tolist()
        stuck = [requests[i].rid for i, ok in zip(constrained, any_allowed, strict=True) if not ok]
        if stuck:
            raise ValueError(
                f"the output constraint of request {stuck[0]!r} allows no next token: its grammar cannot go on "
                "from what was generated"
            )
    return logits


def grammar_bitmask(requests: Sequence[RequestView], vocab: int) -> torch.Tensor:
    """Int32 [requests, ceil(vocab / 32)]: bit t % 32 of word t // 32 of row k set when request
    k's grammar allows token t next."""
    bitmask = torch.full((len(requests), (vocab + _BITS - 1) // _BITS), -1, dtype=torch.int32)
    for row, request in enumerate(requests):
        assert request.grammar is not None
        request.grammar.fill_next_token_bitmask(bitmask, row)
    return bitmask


def _unpacked(bitmask: torch.Tensor, vocab: int) -> torch.Tensor:
    """Bool [rows, vocab] of `bitmask`'s bits (the torch form, for logits off the CPU)."""
    shifts = torch.arange(_BITS, dtype=torch.int32)
    return ((bitmask.unsqueeze(-1) >> shifts) & 1).reshape(bitmask.shape[0], -1)[:, :vocab].bool()
