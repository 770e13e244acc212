"""The acceptance test and the adaptive rule, over the published spec bag read at each decision."""

from collections.abc import Iterator

import pytest

import config_bags
import config_bags.server
from config_bags.server import Bags, SpecBag
from spec_workers import AcceptanceGate, accepted_count_of, low_acceptance_of, next_draft_length_of

SPEC = SpecBag(
    speculative_algorithm="ngram",
    speculative_adaptive_window=2,
    speculative_adaptive_min_accept_rate=0.5,
    speculative_adaptive_pause_steps=3,
    speculative_adaptive_draft_length=False,
)


@pytest.fixture(autouse=True)
def _published() -> Iterator[None]:
    config_bags.unpublish()
    config_bags.publish(Bags(spec=SPEC), role="standalone")
    yield
    config_bags.unpublish()


def test_drafts_are_accepted_while_they_equal_the_targets_samples() -> None:
    assert accepted_count_of([4, 5, 6], [4, 5, 6, 7]) == 3
    assert accepted_count_of([4, 5, 6], [4, 9, 6, 7]) == 1
    assert accepted_count_of([4], [3, 4]) == 0
    assert accepted_count_of([], [8]) == 0
    with pytest.raises(ValueError, match="3 drafts need 4 samples, got 3"):
        accepted_count_of([1, 2, 3], [1, 2, 3])


def test_a_full_window_of_low_acceptance_pauses_the_request_then_it_tries_again() -> None:
    """Reverse-verified: with the pause never set in `AcceptanceGate.verify`, `drafts_for` kept
    offering and the second assert failed."""
    gate = AcceptanceGate()
    gate.verify("r", [1, 2, 3], [1, 0, 0, 0])  # 1 of 3
    assert gate.drafts_for("r", 3) == 3  # the window is not full yet
    gate.verify("r", [1, 2, 3], [0, 0, 0, 0])  # 1 of 6 over the window: below 0.5
    assert [gate.drafts_for("r", 3) for _ in range(4)] == [0, 0, 0, 3]
    assert gate.drafts_for("other", 3) == 3
    gate.verify("r", [1, 2], [1, 2, 3])
    gate.verify("r", [1, 2], [1, 2, 3])
    assert gate.drafts_for("r", 3) == 3 and gate.paused == 0


def test_windows_low_in_a_row_double_the_pause_until_one_is_not() -> None:
    """Reverse-verified: with the doubling removed (the pause always the leaf's 3), the second
    pause lasted 3 offers and the assert on 6 failed."""
    gate = AcceptanceGate()

    def pause_after_a_low_window() -> int:
        gate.verify("r", [1], [0, 0])
        gate.verify("r", [1], [0, 0])
        offers = 0
        while gate.drafts_for("r", 1) == 0:
            offers += 1
        return offers

    assert [pause_after_a_low_window() for _ in range(5)] == [3, 6, 12, 24, 24]  # at most 2**MAX_PAUSE_DOUBLINGS x
    gate.verify("r", [1], [1, 0])
    gate.verify("r", [1], [1, 0])  # a window that is not low ends the streak
    assert pause_after_a_low_window() == 3


def test_a_request_drafts_longer_after_full_acceptance_and_shorter_after_a_rejection() -> None:
    """Reverse-verified: with `drafts_for` answering the whole offer, the lengths stayed at 7."""
    config_bags.override("admin", speculative_adaptive_draft_length=True, speculative_adaptive_min_accept_rate=0.0)
    assert next_draft_length_of(3, 3) == 6 and next_draft_length_of(3, 1) == 2 and next_draft_length_of(4, 0) == 1
    gate = AcceptanceGate()
    assert gate.drafts_for("r", 7) == 7  # a request without a verify takes the whole offer
    gate.verify("r", [1, 2, 3, 4, 5, 6, 7], [1, 2, 9, 0, 0, 0, 0, 0])  # 2 accepted
    assert gate.drafts_for("r", 7) == 3
    gate.verify("r", [1, 2, 3], [1, 2, 3, 4])  # all accepted
    assert gate.drafts_for("r", 7) == 6 and gate.drafts_for("r", 4) == 4  # never more than offered
    gate.verify("r", [1, 2, 3, 4, 5, 6], [0] * 7)
    assert gate.drafts_for("r", 7) == 1
    config_bags.override("admin", speculative_adaptive_draft_length=False)
    assert gate.drafts_for("r", 7) == 7  # the leaf is read at each offer


def test_the_rule_reads_its_leaves_at_each_decision() -> None:
    gate = AcceptanceGate()
    config_bags.override("admin", speculative_adaptive_min_accept_rate=0.0)
    for _ in range(4):
        gate.verify("r", [1, 2, 3], [0, 0, 0, 0])
    assert gate.drafts_for("r", 3) == 3  # 0 disables the rule
    config_bags.override("admin", speculative_adaptive_min_accept_rate=0.5, speculative_adaptive_window=3)
    assert not low_acceptance_of([(3, 0), (3, 0)], config_bags.server.get_spec())
    assert low_acceptance_of([(3, 0), (3, 0), (3, 1)], config_bags.server.get_spec())


def test_forget_drops_the_history() -> None:
    gate = AcceptanceGate()
    gate.verify("r", [1], [0, 0])
    gate.verify("r", [1], [0, 0])
    assert gate.paused == 1
    gate.forget("r")
    assert gate.paused == 0 and gate.drafts_for("r", 1) == 1
