"""disagg: prefill/decode disaggregation."""

from __future__ import annotations

from typing import Annotated, Literal

from config_bags.bag import Bag
from config_bags.constraints import Port
from config_bags.leaf import leaf

DisaggregationMode = Literal["null", "prefill", "decode"]


class DisaggBag(Bag, frozen=True, kw_only=True):
    """Which half of a disaggregated deployment this server is."""

    disaggregation_mode: Annotated[
        DisaggregationMode, leaf("Serve both phases (null), or only prefill or decode.", hot=False)
    ] = "null"
    disaggregation_bootstrap_port: Annotated[
        Port, leaf("Port where a prefill server hands KV caches to decode servers.", hot=False)
    ] = 8998
