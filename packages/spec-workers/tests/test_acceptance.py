"""The acceptance test and the adaptive rule, over the published spec bag read at each decision."""

from collections.abc import Iterator

import pytest

import config_bags
from config_bags import Bags, SpecBag
from spec_workers import AcceptanceGate, accepted_count_of, low_acceptance_of

SPEC = SpecBag(speculative_algorithm="ngram", speculative_adaptive_window=2, speculative_adaptive_min_accept_rate=0.5,
               speculative_adaptive_pause_steps=3)


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
    """Reverse-verified: with the pause never set in `AcceptanceGate.verify`, `allows` stayed True
    and the second assert failed."""
    gate = AcceptanceGate()
    gate.verify("r", [1, 2, 3], [1, 0, 0, 0])  # 1 of 3
    assert gate.allows("r")  # the window is not full yet
    gate.verify("r", [1, 2, 3], [0, 0, 0, 0])  # 1 of 6 over the window: below 0.5
    assert [gate.allows("r") for _ in range(4)] == [False, False, False, True]
    assert gate.allows("other")
    gate.verify("r", [1, 2], [1, 2, 3])
    gate.verify("r", [1, 2], [1, 2, 3])
    assert gate.allows("r") and gate.paused == 0


def test_the_rule_reads_its_leaves_at_each_decision() -> None:
    gate = AcceptanceGate()
    config_bags.override("admin", speculative_adaptive_min_accept_rate=0.0)
    for _ in range(4):
        gate.verify("r", [1, 2, 3], [0, 0, 0, 0])
    assert gate.allows("r")  # 0 disables the rule
    config_bags.override("admin", speculative_adaptive_min_accept_rate=0.5, speculative_adaptive_window=3)
    assert not low_acceptance_of([(3, 0), (3, 0)], config_bags.get_spec())
    assert low_acceptance_of([(3, 0), (3, 0), (3, 1)], config_bags.get_spec())


def test_forget_drops_the_history() -> None:
    gate = AcceptanceGate()
    gate.verify("r", [1], [0, 0])
    gate.verify("r", [1], [0, 0])
    assert gate.paused == 1
    gate.forget("r")
    assert gate.paused == 0 and gate.allows("r")
