"""The front end's check of a runtime override: refused exactly as a serving process would refuse
it, before any process changes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import config_bags
import config_bags.server
from config_bags import ColdLeafError, LeafValueError, UnknownLeafError
from config_bags.server import Bags
from serve.config_override import apply_override, check_runtime_override, hot_leaf_names
from serve.ipc.messages import OverrideRequest
from serve.launch_rules import launch_rules
from serve.served_model import ServedModel


@pytest.fixture
def serving() -> Iterator[None]:
    model = ServedModel(
        architecture="LlamaForCausalLM",
        max_positions=4096,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        linear_attention=False,
    )
    config_bags.publish(Bags(), role="launcher", rules=launch_rules(model))
    config_bags.begin_serving()
    yield
    config_bags.unpublish()


@pytest.mark.parametrize(
    ("leaves", "error", "needle"),
    [
        ({"max_n": 4, "page_size": 2}, ColdLeafError, "page_size"),
        ({"max_n": 0}, LeafValueError, "max_n"),
        ({"max_m": 2}, UnknownLeafError, "did you mean max_n"),
        ({"chunked_prefill_size": 0}, LeafValueError, "chunked_prefill_size"),
        ({}, LeafValueError, "no leaves"),
        # Hot, but its feature is absent: the front end checks the published rules, as every
        # process's override() does. Reverse-verified: with check_runtime_override checking only
        # config-bags' invariants, this passed the front end and each process then refused it.
        ({"mm_max_items_per_request": 2}, config_bags.RuleBrokenError, "this build has no multimodal model"),
    ],
)
def test_refusals_change_nothing(serving: None, leaves: dict[str, Any], error: type[Exception], needle: str) -> None:
    before = config_bags.config_hash()
    with pytest.raises(error, match=needle):
        check_runtime_override(leaves)
    assert config_bags.config_hash() == before and config_bags.overrides_log() == []


def test_check_is_pure_and_apply_acknowledges(serving: None) -> None:
    before = config_bags.config_hash()
    check_runtime_override({"max_n": 4})
    assert config_bags.config_hash() == before
    ack = apply_override(OverrideRequest(seq=1, source="test", leaves={"max_n": 4}), "scheduler")
    assert ack.error is None and ack.config_hash == config_bags.config_hash() != before
    assert config_bags.server.get_serving().max_n == 4


def test_apply_reports_a_refusal(serving: None) -> None:
    ack = apply_override(OverrideRequest(seq=2, source="test", leaves={"page_size": 4}), "detokenizer")
    assert ack.error is not None and "cold" in ack.error and ack.process == "detokenizer"


def test_hot_leaves_are_exactly_the_hot_ones() -> None:
    names = hot_leaf_names()
    assert "max_running_requests" in names and "stream_interval" in names and "page_size" not in names
    assert all(config_bags.leaf_spec(n, config_bags.server.Bags).hot for n in names)
