"""Hypothesis strategies for valid bags and for arbitrary (often invalid) leaf values, built from
the leaf table so a new leaf is covered without editing the tests."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

import config_bags
import config_bags.server
from config_bags import LeafSpec
from config_bags.server import Bags


def _valid_value(spec: LeafSpec) -> st.SearchStrategy[Any]:
    if spec.choices is not None:
        values = st.sampled_from(spec.choices)
        return st.one_of(st.none(), values) if spec.optional else values
    if isinstance(spec.default, bool):
        return st.booleans()
    if isinstance(spec.default, int) or spec.name in {"max_total_tokens", "context_length", "max_queued_requests"}:
        return st.integers(min_value=1, max_value=1 << 20)
    if isinstance(spec.default, float):
        return st.floats(min_value=1.5, max_value=64.0, allow_nan=False)
    return st.just(spec.default)


@st.composite
def valid_bags(draw: st.DrawFn) -> Bags:
    """Bags whose leaves vary wherever a bag accepts them; combinations a bag refuses are redrawn."""
    leaves: dict[str, Any] = {}
    for name, spec in config_bags.leaf_specs(config_bags.server.Bags).items():
        if draw(st.booleans()):
            leaves[name] = draw(_valid_value(spec))
    try:
        return config_bags.with_leaves(Bags(), leaves, rules=config_bags.server.INVARIANTS)
    except config_bags.LeafValueError:
        return Bags()


ANY_VALUE: st.SearchStrategy[Any] = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-5, max_value=1 << 17),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.lists(st.integers(min_value=-2, max_value=64), max_size=4),
)
