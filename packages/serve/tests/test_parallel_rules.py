"""The parallel topology's rules, published with the bags: every override (and publish) is checked
against them, and a refused one leaves every bag, the config hash and the overrides log as they
were. (A serving process refuses any change of these cold leaves first; these are the overrides a
process may still make before it serves.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import config_bags
import config_bags.server
from config_bags import RuleBrokenError
from config_bags.server import Bags
from serve.launch_rules import launch_rules
from serve.served_model import ServedModel

# The default model's shape (SmolLM2-135M): 9 heads, 3 KV heads.
SMOLLM2 = ServedModel(
    architecture="LlamaForCausalLM",
    max_positions=8192,
    num_attention_heads=9,
    num_key_value_heads=3,
    intermediate_size=1536,
    linear_attention=False,
)
HYBRID = ServedModel(
    architecture="Qwen3NextForCausalLM",
    max_positions=4096,
    num_attention_heads=8,
    num_key_value_heads=2,
    intermediate_size=512,
    linear_attention=True,
)
ADDRESS = "10.0.0.1:29500"


@pytest.fixture
def published() -> Iterator[None]:
    config_bags.publish(Bags(), role="standalone", rules=launch_rules(SMOLLM2))
    yield
    config_bags.unpublish()


@pytest.mark.parametrize(
    ("leaves", "rule", "message"),
    [
        ({"tp_size": 2}, "tensor_parallel_fits_model", "num_attention_heads = 9 not divisible by tp_size = 2"),
        (
            {"tp_size": 3, "nnodes": 2, "dist_init_addr": ADDRESS},
            "nodes_divide_ranks",
            "tp_size * pp_size = 3 * 1 = 3 not divisible by nnodes = 2",
        ),
        (
            {"tp_size": 3, "dp_size": 2, "nnodes": 3, "dist_init_addr": ADDRESS},
            "parallel_as_built",
            "dp_size = 2 with nnodes = 3: data-parallel replicas run on node 0",
        ),
        (
            {"tp_size": 3, "speculative_algorithm": "draft_model", "speculative_draft_model_path": "/draft"},
            "parallel_as_built",
            "speculative_algorithm = 'draft_model' runs an unsharded draft runner, and tp_size = 3 splits the target",
        ),
    ],
)
def test_a_topology_override_that_breaks_a_rule_changes_nothing(
    published: None, leaves: dict[str, Any], rule: str, message: str
) -> None:
    """Reverse-verified: with serve.parallel_rules' two rules left out of launch_rules, the first,
    third and fourth overrides were applied (the hash changed and the log grew)."""
    before = (config_bags.server.published_bags(), config_bags.config_hash(), list(config_bags.overrides_log()))
    with pytest.raises(RuleBrokenError) as caught:
        config_bags.override("admin", **leaves)
    assert caught.value.rule.name == rule and str(caught.value).startswith(message), str(caught.value)
    assert (config_bags.server.published_bags(), config_bags.config_hash(), list(config_bags.overrides_log())) == before


def test_a_topology_the_model_splits_over_is_taken(published: None) -> None:
    """9 heads, 3 KV heads and 1536 intermediate rows split over 3 ranks (one KV head each)."""
    before = config_bags.config_hash()
    config_bags.override("admin", tp_size=3, dp_size=2)
    assert config_bags.server.get_parallel().tp_size == 3 and config_bags.config_hash() != before


def test_a_hybrid_model_is_not_split() -> None:
    """Reverse-verified: with tensor_parallel_fits_model left out of launch_rules, these bags published."""
    with pytest.raises(
        RuleBrokenError, match="Qwen3NextForCausalLM has linear-attention layers, which run unsharded in one process"
    ):
        config_bags.publish(
            config_bags.with_leaves(Bags(), {"tp_size": 2}, rules=()), role="standalone", rules=launch_rules(HYBRID)
        )
    assert not config_bags.is_published()
