"""The native grammar mask (`runtime_runner.sampling.forbidden_tokens`) against the bits it reads:
every logit whose token's bit is 0 becomes -inf, every other keeps its value bit for bit, on the
named rows only, with a vocabulary that ends inside a word (its bits past the vocabulary ignored)."""

from __future__ import annotations

import pytest
import torch

from runtime_runner.sampling.forbidden_tokens import mask_forbidden


def expected(logits: torch.Tensor, rows: list[int], bitmask: torch.Tensor) -> tuple[torch.Tensor, list[bool]]:
    """The mask applied token by token from the words' bits, in plain Python."""
    out = logits.clone()
    vocab = logits.shape[1]
    any_allowed = []
    for k, row in enumerate(rows):
        words = [w & 0xFFFFFFFF for w in bitmask[k].tolist()]
        bits = [(words[t // 32] >> (t % 32)) & 1 for t in range(vocab)]
        out[row, [t for t in range(vocab) if not bits[t]]] = float("-inf")
        any_allowed.append(any(bits))
    return out, any_allowed


@pytest.mark.parametrize("vocab", [32, 1000, 4133])
def test_forbidden_logits_become_minus_infinity_and_the_rest_stay(vocab: int) -> None:
    """Random words, all-allowed and all-forbidden words, on rows 0 and 2 of 3 (row 1 untouched).

    Reverse-verified: with the tail word's bits left unmasked past the vocabulary, the 4133 case's
    all-forbidden row reported a token allowed (the 1000 case too); with the select inverted, every case failed."""
    generator = torch.Generator().manual_seed(vocab)
    logits = torch.randn(3, vocab, generator=generator)
    words = (vocab + 31) // 32
    bitmask = torch.randint(-(2**31), 2**31 - 1, (2, words), dtype=torch.int32, generator=generator)
    bitmask[0, 0] = -1
    bitmask[1, :] = 0
    bitmask[1, -1] = -1 << (vocab % 32) if vocab % 32 else 0  # only bits past the vocabulary set
    want, want_allowed = expected(logits, [0, 2], bitmask)
    masked = logits.clone()
    assert mask_forbidden(masked, [0, 2], bitmask) == want_allowed == [True, False]
    assert torch.equal(masked, want)


def test_logits_it_cannot_take_are_refused() -> None:
    """Wrong dtype, or a bitmask too short for the vocabulary, is an error naming what it takes."""
    bitmask = torch.zeros(1, 1, dtype=torch.int32)
    with pytest.raises(ValueError, match="fp32 CPU logits"):
        mask_forbidden(torch.zeros(1, 32, dtype=torch.bfloat16), [0], bitmask)
    with pytest.raises(ValueError, match="does not cover"):
        mask_forbidden(torch.zeros(1, 64), [0], bitmask)
