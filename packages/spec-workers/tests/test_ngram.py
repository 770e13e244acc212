"""The n-gram proposer: longest suffix match, most recent occurrence, budget and windows from the
spec bag, read at each call so an override applies to the next proposal."""

from collections.abc import Iterator

import pytest

import config_bags
from config_bags.server import Bags, SpecBag
from spec_workers import ngram_draft, ngram_draft_of

NGRAM = SpecBag(speculative_algorithm="ngram")


@pytest.fixture(autouse=True)
def _unpublished() -> Iterator[None]:
    config_bags.unpublish()
    yield
    config_bags.unpublish()


def test_proposes_what_followed_the_matching_suffix() -> None:
    assert ngram_draft_of([5, 6, 7, 8, 9, 1, 5, 6], NGRAM, 3) == [7, 8, 9]


def test_the_longest_window_wins_over_a_shorter_more_recent_match() -> None:
    context = [1, 2, 3, 40, 9, 3, 50, 1, 2, 3]
    assert ngram_draft_of(context, NGRAM, 3) == [40, 9, 3]


def test_the_most_recent_occurrence_wins_among_equal_windows() -> None:
    context = [7, 1, 7, 2, 7]
    assert ngram_draft_of(context, NGRAM, 3) == [2, 7]


def test_no_match_or_no_speculation_proposes_nothing() -> None:
    assert ngram_draft_of([1, 2, 3, 4], NGRAM, 3) == []
    assert ngram_draft_of([5, 6, 5, 6], NGRAM, 0) == []
    assert ngram_draft_of([], NGRAM, 3) == []


def test_the_min_window_bounds_what_counts_as_a_match() -> None:
    strict = SpecBag(speculative_algorithm="ngram", speculative_ngram_min_match_window=2)
    assert ngram_draft_of([4, 9, 1, 4], strict, 3) == []
    assert ngram_draft_of([3, 4, 9, 1, 3, 4], strict, 3) == [9, 1, 3]


def test_the_published_accessor_follows_an_override() -> None:
    """Reverse-verified: keeping the spec bag read on the first call made the second assert fail."""
    config_bags.publish(Bags(spec=NGRAM), role="standalone")
    context = [1, 2, 3, 40, 9, 3, 50, 1, 2, 3]
    assert ngram_draft(context, 3) == [40, 9, 3]
    config_bags.override("admin", speculative_ngram_max_match_window=1)
    assert ngram_draft(context, 3) == [50, 1, 2]


def test_a_long_context_proposes_from_its_latest_occurrence() -> None:
    context = list(range(100, 600)) + [7, 8, 9] + list(range(600, 1100)) + [7, 8]
    assert ngram_draft_of(context, NGRAM, 4) == [9, 600, 601, 602]
