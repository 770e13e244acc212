"""Bags across processes: msgpack round trips, validation on the way in, a stable hash."""

import subprocess
import sys

import pytest
from bag_strategies import valid_bags
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import config_bags
import config_bags.server
from config_bags.server import Bags


@settings(max_examples=150, deadline=None)
@given(valid_bags())
def test_encode_decode_round_trips_any_valid_bags(bags: Bags) -> None:
    assert config_bags.decode(config_bags.encode(bags), config_bags.server.Bags) == bags


@settings(max_examples=100, deadline=None)
@given(valid_bags())
def test_equal_bags_hash_equal(bags: Bags) -> None:
    assert config_bags.hash_of(
        config_bags.decode(config_bags.encode(bags), config_bags.server.Bags)
    ) == config_bags.hash_of(bags)


def test_decode_refuses_invalid_bytes_with_the_reason() -> None:
    with pytest.raises(config_bags.WireError, match="bytes do not decode into valid Bags"):
        config_bags.decode(b"\x00garbage", config_bags.server.Bags)
    import msgspec

    bad = msgspec.msgpack.encode({"schedule": {"page_size": 0}})
    with pytest.raises(config_bags.WireError, match=r"Expected `int` >= 1 - at `\$.schedule.page_size`"):
        config_bags.decode(bad, config_bags.server.Bags)
    cross = msgspec.msgpack.encode({"schedule": {"chunked_prefill_size": 0}})
    with pytest.raises(
        config_bags.WireError,
        match="ScheduleBag.chunked_prefill_size = 0 is not accepted; accepted: an int >= 1, or -1",
    ):
        config_bags.decode(cross, config_bags.server.Bags)


def test_two_processes_that_published_the_same_bags_report_the_same_hash() -> None:
    bags = Bags(
        schedule=config_bags.server.ScheduleBag(page_size=16), serving=config_bags.server.ServingBag(port=31000)
    )
    config_bags.publish(bags, role="launcher")
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, config_bags as c, config_bags.server as s;"
            " c.publish(c.decode(sys.stdin.buffer.read(), s.Bags), role='scheduler');"
            "print(c.config_hash())",
        ],
        input=config_bags.encode(bags),
        capture_output=True,
        check=True,
    )
    assert child.stdout.decode().strip() == config_bags.config_hash()


@settings(max_examples=100, deadline=None)
@given(valid_bags(), st.sampled_from(["max_running_requests", "page_size", "log_level", "tp_size"]))
def test_any_override_that_changes_a_value_changes_the_hash(bags: Bags, leaf: str) -> None:
    config_bags.unpublish()
    config_bags.publish(bags, role="standalone")
    before = config_bags.config_hash()
    current = config_bags.leaf_value(leaf)
    new = {"log_level": "error" if current != "error" else "debug"}.get(
        leaf, current + 1 if isinstance(current, int) else current
    )
    try:
        config_bags.with_leaves(bags, {leaf: new}, rules=config_bags.published_rules())
    except config_bags.RuleBrokenError:
        assume(False)  # a change the rules refuse changes nothing (test_rules.py), so it has no new hash
    config_bags.override("prop", **{leaf: new})
    assert config_bags.config_hash() != before
