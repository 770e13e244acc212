"""The Prometheus exposition /metrics serves."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import config_bags
from config_bags.server import Bags, ParallelBag
from runtime_scheduler import SchedulerMetrics
from serve.metrics.histogram import Histogram
from serve.metrics.server_metrics import ServerMetrics
from serve_testing.prometheus import metric_value


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


@pytest.fixture
def two_replicas() -> Iterator[None]:
    config_bags.publish(Bags(parallel=ParallelBag(dp_size=2)), role="standalone")
    yield
    config_bags.unpublish()


def snapshot(*, running: int, total: int, free: int, usage: float, admitted: int, cached: int) -> SchedulerMetrics:
    return SchedulerMetrics(
        num_running=running,
        num_waiting=0,
        total_pages=total,
        free_pages=free,
        cached_pages=0,
        evictable_pages=0,
        token_usage=usage,
        admitted_tokens=admitted,
        cached_tokens=cached,
        cache_hit_rate=cached / admitted if admitted else 0.0,
        num_retractions=0,
        num_finished=running,
        num_aborted=0,
    )


def test_server_wide_gauges_appear_once_every_replica_reported_and_combine_them(two_replicas: None) -> None:
    """Each replica's own gauges are labelled; the unlabelled ones sum the replicas (usage and hit
    rate over the summed pages and tokens). Reverse-verified: with the server-wide figures taken
    from the last replica that reported, the sums failed."""
    metrics = ServerMetrics()
    assert "serve_num_running_requests" not in metrics.render()
    assert "serve_time_to_first_token_seconds_bucket" in metrics.render()
    metrics.replicas[1] = snapshot(running=2, total=8, free=3, usage=0.5, admitted=10, cached=5)
    text = metrics.render()
    assert (
        "serve_num_running_requests" not in text
        and metric_value(text, 'serve_replica_num_running_requests{replica="1"}') == 2
    )
    metrics.replicas[0] = snapshot(running=1, total=24, free=20, usage=0.125, admitted=30, cached=0)
    text = metrics.render()
    assert metric_value(text, "serve_num_running_requests") == 3 and metric_value(text, "serve_kv_free_pages") == 23
    assert metric_value(text, "serve_kv_usage_ratio") == pytest.approx((0.5 * 8 + 0.125 * 24) / 32)
    assert metric_value(text, "serve_cache_hit_rate") == pytest.approx(5 / 40)
    assert metric_value(text, 'serve_replica_kv_free_pages{replica="0"}') == 20
