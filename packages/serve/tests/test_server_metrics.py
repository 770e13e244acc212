"""The Prometheus exposition /metrics serves."""

from __future__ import annotations

import pytest
from serve.metrics.histogram import Histogram
from serve.metrics.server_metrics import ServerMetrics


def test_histogram_buckets_are_cumulative() -> None:
    histogram = Histogram("latency_seconds", "A latency.", (0.1, 1.0))
    for value in (0.05, 0.1, 0.5, 3.0):
        histogram.observe(value)
    lines = histogram.exposition()
    assert lines[:2] == ["# HELP latency_seconds A latency.", "# TYPE latency_seconds histogram"]
    assert lines[2:] == [
        'latency_seconds_bucket{le="0.1"} 2',
        'latency_seconds_bucket{le="1.0"} 3',
        'latency_seconds_bucket{le="+Inf"} 4',
        "latency_seconds_sum 3.65",
        "latency_seconds_count 4",
    ]


def test_histogram_refuses_unsorted_bounds() -> None:
    with pytest.raises(ValueError, match="strictly increasing"):
        Histogram("h", "x", (1.0, 0.5))


def test_throughput_counts_only_the_recent_window() -> None:
    metrics = ServerMetrics()
    metrics.tokens_generated(50, now=100.0)
    metrics.tokens_generated(30, now=105.0)
    assert metrics.throughput(now=108.0) == pytest.approx(8.0)
    assert metrics.throughput(now=112.0) == pytest.approx(3.0)  # the first 50 left the 10 s window
    assert metrics.generation_tokens == 80


def test_render_has_scheduler_gauges_only_once_known() -> None:
    metrics = ServerMetrics()
    assert "serve_num_running_requests" not in metrics.render()
    assert "serve_time_to_first_token_seconds_bucket" in metrics.render()
