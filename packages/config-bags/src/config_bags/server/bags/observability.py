"""observability: logs and metrics."""

from __future__ import annotations

from typing import Annotated, Literal

from config_bags.bag import Bag
from config_bags.leaf import leaf

LogLevel = Literal["debug", "info", "warning", "error", "critical"]


class ObservabilityBag(Bag, frozen=True, kw_only=True):
    """Logging and the Prometheus endpoint."""

    log_level: Annotated[LogLevel, leaf("Log level of every process.", hot=True)] = "info"
    log_requests: Annotated[bool, leaf("Log each request's inputs and outputs.", hot=True)] = False
    enable_metrics: Annotated[bool, leaf("Serve Prometheus metrics at /metrics.", hot=False)] = True
