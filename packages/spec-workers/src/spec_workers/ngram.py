"""N-gram speculation: propose the tokens that followed the latest earlier occurrence of the
context's longest matching suffix. No draft model; the context itself is the draft source."""

from __future__ import annotations

from collections.abc import Sequence

from config_bags.server import SpecBag, get_spec


def ngram_draft_of(context: Sequence[int], spec: SpecBag, most: int) -> list[int]:
    """Up to `most` draft tokens for `context` under `spec`'s match windows (empty when no match).

    Windows are tried from speculative_ngram_max_match_window down to the min window; the most
    recent earlier occurrence of the suffix wins, as it best predicts what comes next. Only the
    earlier positions holding the context's last token are candidates, so a long context costs
    one pass over it plus a window's compare per candidate.
    """
    if most <= 0 or len(context) < 2:
        return []
    tokens = list(context)
    last = tokens[-1]
    # ends of earlier occurrences of the last token that leave at least one token to propose
    ends = [i for i in range(len(tokens) - 2, -1, -1) if tokens[i] == last]
    longest = min(spec.speculative_ngram_max_match_window, len(tokens) - 1)
    for window in range(longest, spec.speculative_ngram_min_match_window - 1, -1):
        suffix = tokens[-window:]
        for end in ends:
            start = end - window + 1
            if start >= 0 and tokens[start : end + 1] == suffix:
                return tokens[end + 1 : end + 1 + most]
    return []


def ngram_draft(context: Sequence[int], most: int) -> list[int]:
    """`ngram_draft_of` under the published spec bag, read at the moment of the call."""
    return ngram_draft_of(context, get_spec(), most)
