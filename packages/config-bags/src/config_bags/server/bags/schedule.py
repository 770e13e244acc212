"""schedule: what the scheduler decides each step (batch sizes, chunking, policy)."""

from __future__ import annotations

from typing import Annotated, Literal

from config_bags.bag import Bag
from config_bags.constraints import PositiveInt, PositiveOrDisabledInt
from config_bags.errors import LeafValueError
from config_bags.leaf import leaf

SchedulePolicy = Literal["fcfs", "lpm"]


class ScheduleBag(Bag, frozen=True, kw_only=True):
    """Scheduling: pages, chunked prefill, admission caps and policy."""

    page_size: Annotated[
        PositiveInt, leaf("Tokens per KV-cache page (the unit of allocation and prefix sharing).", hot=False)
    ] = 1
    chunked_prefill_size: Annotated[
        PositiveOrDisabledInt, leaf("Most prompt tokens one request prefills per step; -1 disables chunking.", hot=True)
    ] = 2048
    max_running_requests: Annotated[PositiveInt, leaf("Most requests decoding at once.", hot=True)] = 256
    max_prefill_tokens: Annotated[
        PositiveInt, leaf("Most prompt tokens admitted into one step's prefill.", hot=True)
    ] = 16384
    schedule_policy: Annotated[
        SchedulePolicy, leaf("Admission order: fcfs (arrival) or lpm (longest cached prefix first).", hot=True)
    ] = "fcfs"
    max_queued_requests: Annotated[
        PositiveInt | None,
        leaf("Most requests waiting for admission; beyond it new requests are refused (unset: no cap).", hot=True),
    ] = None

    def check_leaves_together(self) -> None:
        if self.chunked_prefill_size == 0:
            raise LeafValueError(
                "ScheduleBag.chunked_prefill_size = 0 is not accepted; accepted: an int >= 1, or -1 (no chunking)"
            )
