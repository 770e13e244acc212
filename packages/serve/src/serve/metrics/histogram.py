"""A cumulative Prometheus histogram and its text exposition."""

from __future__ import annotations

import bisect
from collections.abc import Sequence


class Histogram:
    """Observations counted into fixed upper bounds, plus their sum and count."""

    def __init__(self, name: str, help_text: str, bounds: Sequence[float]) -> None:
        if list(bounds) != sorted(set(bounds)):
            raise ValueError(f"histogram {name}: bounds must be strictly increasing, got {list(bounds)}")
        self.name = name
        self.help_text = help_text
        self.bounds = tuple(bounds)
        self.counts = [0] * (len(self.bounds) + 1)  # the last one is +Inf
        self.total = 0.0

    @classmethod
    def of_integer_counts(cls, name: str, help_text: str, counts: Sequence[int]) -> Histogram:
        """A histogram of integer observations counted elsewhere: `counts[n]` observations of n
        (n >= 1; counts[0] must be 0), one bucket per integer."""
        if counts and counts[0] != 0:
            raise ValueError(f"histogram {name}: integer counts start at 1, got {counts[0]} observations of 0")
        histogram = cls(name, help_text, tuple(float(n) for n in range(1, max(len(counts), 2))))
        for n, count in enumerate(counts[1:], 1):
            histogram.counts[n - 1] = count
        histogram.total = float(sum(n * c for n, c in enumerate(counts)))
        return histogram

    def observe(self, value: float) -> None:
        """Count one observation."""
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.total += value

    @property
    def count(self) -> int:
        """How many observations were made."""
        return sum(self.counts)

    def exposition(self) -> list[str]:
        """The histogram in Prometheus text format (cumulative buckets)."""
        lines = [f"# HELP {self.name} {self.help_text}", f"# TYPE {self.name} histogram"]
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            label = "+Inf" if bound == float("inf") else repr(bound)
            lines.append(f'{self.name}_bucket{{le="{label}"}} {running}')
        lines.append(f"{self.name}_sum {self.total}")
        lines.append(f"{self.name}_count {running}")
        return lines
