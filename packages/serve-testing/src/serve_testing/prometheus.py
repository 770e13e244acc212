"""Reading one sample out of the server's Prometheus text exposition, for tests and benchmarks."""

from __future__ import annotations

import re


def metric_value(exposition: str, name: str) -> float:
    """The value of the unlabelled sample `name` in `exposition` (GET /metrics); AssertionError
    naming it when it is absent."""
    match = re.search(rf"^{re.escape(name)} (\S+)$", exposition, re.MULTILINE)
    assert match, f"{name} not in /metrics:\n{exposition}"
    return float(match.group(1))
