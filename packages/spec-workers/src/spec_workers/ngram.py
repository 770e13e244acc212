"""N-gram speculation: propose the tokens that followed the latest earlier occurrence of the
context's longest matching suffix. No draft model; the context itself is the draft source."""

from __future__ import annotations

from collections.abc import Sequence

from config_bags import SpecBag, get_spec, max_speculative_num_draft_tokens_of


def ngram_draft_of(context: Sequence[int], spec: SpecBag) -> list[int]:
    """Draft tokens for `context` under `spec`'s windows and draft budget (empty when no match).

    Windows are tried from speculative_ngram_max_match_window down to the min window; the most
    recent earlier occurrence of the suffix wins, as it best predicts what comes next.
    """
    budget = max_speculative_num_draft_tokens_of(spec)
    if budget == 0:
        return []
    tokens = list(context)
    longest = min(spec.speculative_ngram_max_match_window, len(tokens) - 1)
    for window in range(longest, spec.speculative_ngram_min_match_window - 1, -1):
        suffix = tokens[-window:]
        for start in range(len(tokens) - window - 1, -1, -1):
            if tokens[start : start + window] == suffix:
                follow = start + window
                return tokens[follow : follow + budget]
    return []


def ngram_draft(context: Sequence[int]) -> list[int]:
    """`ngram_draft_of` under the published spec bag, read at the moment of the call."""
    return ngram_draft_of(context, get_spec())
