"""The CPU's feature flags, as Linux lists them in /proc/cpuinfo."""

from __future__ import annotations

import functools
import platform
from pathlib import Path


@functools.cache
def cpu_flags() -> frozenset[str]:
    """The feature flags /proc/cpuinfo lists for this CPU (empty off Linux x86-64)."""
    if platform.system() != "Linux" or platform.machine() != "x86_64":
        return frozenset()
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return frozenset()
    line = next((line for line in text.splitlines() if line.startswith("flags")), "")
    return frozenset(line.partition(":")[2].split())
