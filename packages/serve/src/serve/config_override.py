"""Runtime overrides across processes: the front end's check before broadcasting, and each
process's apply-and-acknowledge."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import config_bags
import config_bags.server
from config_bags import ColdLeafError, leaf_spec, published_root_unchecked, published_rules, with_leaves
from config_bags.server import Bags
from serve.ipc.messages import OverrideAck, OverrideRequest


def check_runtime_override(leaves: Mapping[str, Any]) -> None:
    """Refuse, before any process changes, what `override` would refuse while serving: an empty
    change, unknown leaves, cold leaves, values of the wrong type or outside constraints,
    combinations a bag's cross-leaf check rejects, and bags that break a published rule (a hot
    leaf of an absent feature among them). Raises a config_bags error naming the problem."""
    if not leaves:
        raise config_bags.LeafValueError("no leaves given; send an object of {leaf: value} with at least one hot leaf")
    cold = [leaf_spec(name, Bags) for name in leaves if not leaf_spec(name, Bags).hot]
    if cold:
        which = ", ".join(f"{spec.name} ({spec.namespace})" for spec in cold)
        hot = ", ".join(hot_leaf_names())
        raise ColdLeafError(f"cold leaf cannot change while serving: {which}; hot leaves are: {hot}")
    with_leaves(published_root_unchecked(Bags), leaves, rules=published_rules())


def hot_leaf_names() -> list[str]:
    """Every leaf that may change while serving, in declaration order."""
    return [spec.name for spec in config_bags.leaf_specs(config_bags.server.Bags).values() if spec.hot]


def apply_override(request: OverrideRequest, process: str) -> OverrideAck:
    """Apply an override in this process (named `process`, serve.process_names) and say how it
    went (the hash afterwards, or the error)."""
    try:
        config_bags.override(request.source, **request.leaves)
    except Exception as err:  # reported back to the front end, which answers the client
        return OverrideAck(seq=request.seq, process=process, config_hash=config_bags.config_hash(), error=str(err))
    return OverrideAck(seq=request.seq, process=process, config_hash=config_bags.config_hash())
