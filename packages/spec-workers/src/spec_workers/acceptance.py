"""The acceptance test for drafts drawn deterministically (an n-gram lookup, a greedy draft model).

Speculative sampling accepts draft x at a position with probability min(1, p(x) / q(x)) and, on a
rejection, draws from the residual max(0, p - q) renormalized, where p is the target's
distribution and q the proposal's. A deterministic proposer puts all of q on x: a draft is
accepted with probability p(x), and the residual is p without x, renormalized. That is exactly
what comparing the target's own sample t ~ p with x gives: t == x with probability p(x), and
when t != x, t is distributed as p conditioned on t != x. So a verify samples every position from
the target (the runner does, each as the decode step that would have drawn it), keeps drafts
while they equal those samples, and takes the first differing sample, or the sample after the
last draft, as the target's own next token. The output distribution is exactly the target's;
for a greedy or seeded request the tokens are exactly those it gets without speculation.
"""

from __future__ import annotations

from collections.abc import Sequence


def accepted_count_of(drafts: Sequence[int], samples: Sequence[int]) -> int:
    """How many leading `drafts` equal the target's samples at their positions. `samples` has one
    more entry than `drafts` (the sample after the last draft)."""
    if len(samples) != len(drafts) + 1:
        raise ValueError(
            f"a verify gives one sample per input token: {len(drafts)} drafts need {len(drafts) + 1} samples, "
            f"got {len(samples)}"
        )
    count = 0
    # strict=False: samples has one more entry than drafts, and the last is nobody's to compare
    for draft, sample in zip(drafts, samples, strict=False):
        if draft != sample:
            break
        count += 1
    return count
