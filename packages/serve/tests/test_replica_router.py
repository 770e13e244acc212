"""The tokenizer manager's router over data-parallel replicas: the fewest outstanding tokens, a
recently sent prompt prefix counted as already done at its replica."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import config_bags
from config_bags.server import Bags, ParallelBag
from serve.tokenizer.router import PREFIX_BLOCK, ReplicaRouter


@pytest.fixture
def router() -> Iterator[ReplicaRouter]:
    config_bags.publish(Bags(parallel=ParallelBag(dp_size=2)), role="standalone")
    yield ReplicaRouter()
    config_bags.unpublish()


def test_the_least_loaded_replica_takes_the_request(router: ReplicaRouter) -> None:
    assert router.route("a", [1] * 10, 100) == 0
    assert router.route("b", [2] * 10, 10) == 1
    assert router.route("c", [3] * 10, 10) == 1  # 20 + 110 outstanding there, 110 at replica 0
    assert router.outstanding() == [110, 40]
    router.produced("a", 100)
    assert router.outstanding() == [10, 40] and router.route("d", [4] * 10, 10) == 0
    for rid in "abcd":
        router.finished(rid)
    assert router.outstanding() == [0, 0]


def test_a_shared_prefix_draws_its_requests_to_one_replica_until_it_is_too_busy(router: ReplicaRouter) -> None:
    """Reverse-verified: with the prefix memory left out of `route`, request "d" went to replica 0,
    the one with fewer outstanding tokens."""
    system = list(range(4 * PREFIX_BLOCK))  # a 64-token system prompt
    assert router.route("a", [9] * 10, 150) == 0  # replica 0: 160 outstanding
    assert router.route("b", [*system, 7], 16) == 1  # replica 1: 81
    assert router.route("c", [5] * 10, 70) == 1  # replica 1: 161
    assert router.route("d", [*system, 8], 16) == 1  # 161 less the 64 of its prefix there, against 160
    assert router.outstanding() == [160, 242]
    assert router.route("e", [*system, 9], 16) == 0  # 242 - 64 = 178 is more than replica 0's 160
