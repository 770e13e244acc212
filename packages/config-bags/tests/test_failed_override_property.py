"""Property: an override either applies whole or changes nothing at all."""

from typing import Any

from bag_strategies import ANY_VALUE, valid_bags
from hypothesis import given, settings
from hypothesis import strategies as st

import config_bags
import config_bags.server
from config_bags.server import Bags

LEAF_NAMES = sorted(config_bags.leaf_specs(config_bags.server.Bags)) + ["no_such_leaf"]


@settings(max_examples=300, deadline=None)
@given(valid_bags(), st.dictionaries(st.sampled_from(LEAF_NAMES), ANY_VALUE, min_size=1, max_size=4), st.booleans())
def test_a_failed_override_leaves_bags_hash_and_log_unchanged(
    bags: Bags, leaves: dict[str, Any], serving: bool
) -> None:
    """Reverse-verified: installing the new bags before the cold-leaf check made this fail."""
    config_bags.unpublish()
    config_bags.publish(bags, role="standalone")
    if serving:
        config_bags.begin_serving()
    before = (config_bags.server.published_bags(), config_bags.config_hash(), config_bags.overrides_log())
    try:
        record = config_bags.override("prop", **leaves)
    except (config_bags.ConfigError, ValueError):
        assert (config_bags.server.published_bags(), config_bags.config_hash(), config_bags.overrides_log()) == before
    else:
        if not record.changes:  # every leaf already held its value: a no-op is not a change
            assert (
                config_bags.server.published_bags(),
                config_bags.config_hash(),
                config_bags.overrides_log(),
            ) == before
            return
        assert config_bags.overrides_log() == [*before[2], record]
        for change in record.changes:
            assert config_bags.leaf_value(change.leaf) == change.new
