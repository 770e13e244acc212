"""Everything /metrics reports: request latencies measured in the main process, and the
schedulers' gauges and counters as their last stats messages gave them: server-wide (summed over
the data-parallel replicas, serve.metrics.replicas) unlabelled, and each replica's own labelled
`replica="N"` under `serve_replica_*`."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from config_bags.server import get_parallel
from runtime_scheduler import SchedulerMetrics
from serve.metrics.histogram import Histogram
from serve.metrics.replicas import combined
from serve.metrics.speculative import accept_length_histogram, speculative_rows

_THROUGHPUT_WINDOW_S = 10.0
_TTFT_BOUNDS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_ITL_BOUNDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
_E2E_BOUNDS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class ServerMetrics:
    """Counters, histograms and gauges of the server, rendered as Prometheus text."""

    def __init__(self) -> None:
        self.ttft = Histogram(
            "serve_time_to_first_token_seconds", "Time from request arrival to its first output token.", _TTFT_BOUNDS
        )
        self.itl = Histogram(
            "serve_inter_token_latency_seconds", "Time between consecutive output tokens of a request.", _ITL_BOUNDS
        )
        self.e2e = Histogram(
            "serve_e2e_request_latency_seconds", "Time from request arrival to its last token.", _E2E_BOUNDS
        )
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.requests_finished = 0
        self.requests_aborted = 0
        self.requests_failed = 0
        self.embedding_requests = 0  # /v1/embeddings and /v1/rerank requests sent to the encoder
        self.embedding_inputs = 0
        self.embedding_tokens = 0
        self._recent: deque[tuple[float, int]] = deque()  # (time, tokens) of the last window
        self.replicas: dict[int, SchedulerMetrics] = {}  # each replica's last stats, by replica

    @property
    def scheduler(self) -> SchedulerMetrics | None:
        """The server-wide scheduler figures, once every replica reported (None before)."""
        if len(self.replicas) < get_parallel().dp_size:
            return None
        return combined([self.replicas[replica] for replica in sorted(self.replicas)])

    def tokens_generated(self, count: int, now: float) -> None:
        """Count `count` output tokens delivered at `now` (time.monotonic())."""
        self.generation_tokens += count
        self._recent.append((now, count))

    def throughput(self, now: float) -> float:
        """Output tokens per second over the last few seconds."""
        while self._recent and self._recent[0][0] < now - _THROUGHPUT_WINDOW_S:
            self._recent.popleft()
        return sum(count for _, count in self._recent) / _THROUGHPUT_WINDOW_S

    def render(self) -> str:
        """The Prometheus text exposition of every metric."""
        lines: list[str] = []
        for name, kind, help_text, value in (
            ("serve_prompt_tokens_total", "counter", "Prompt tokens of finished requests.", self.prompt_tokens),
            ("serve_generation_tokens_total", "counter", "Output tokens delivered.", self.generation_tokens),
            (
                "serve_requests_finished_total",
                "counter",
                "Requests that finished (any reason).",
                self.requests_finished,
            ),
            (
                "serve_requests_aborted_total",
                "counter",
                "Requests aborted (client gone or server error).",
                self.requests_aborted,
            ),
            (
                "serve_requests_failed_total",
                "counter",
                "Requests that failed alone while being served (answered a 500; the server went on).",
                self.requests_failed,
            ),
            (
                "serve_embedding_requests_total",
                "counter",
                "Embedding and rerank requests sent to the encoder.",
                self.embedding_requests,
            ),
            (
                "serve_embedding_inputs_total",
                "counter",
                "Inputs of those requests (one vector or score each).",
                self.embedding_inputs,
            ),
            ("serve_embedding_tokens_total", "counter", "Tokens of those inputs.", self.embedding_tokens),
            (
                "serve_gen_throughput_tokens_per_second",
                "gauge",
                "Output tokens per second over the last 10 s.",
                self.throughput(time.monotonic()),
            ),
            *self._scheduler_rows(),
        ):
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name} {value}"]
        for name, kind, help_text, value_of in _REPLICA_ROWS if self.replicas else ():
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
            lines += [
                f'{name}{{replica="{replica}"}} {value_of(self.replicas[replica])}' for replica in sorted(self.replicas)
            ]
        for histogram in (self.ttft, self.itl, self.e2e):
            lines += histogram.exposition()
        stats = self.scheduler
        if stats is not None and stats.spec_accept_length_counts:
            lines += accept_length_histogram(stats).exposition()
        return "\n".join(lines) + "\n"

    def _scheduler_rows(self) -> list[tuple[str, str, str, float]]:
        stats = self.scheduler
        if stats is None:
            return []
        return [
            ("serve_num_running_requests", "gauge", "Requests in the running batch.", stats.num_running),
            ("serve_num_waiting_requests", "gauge", "Requests waiting for admission.", stats.num_waiting),
            ("serve_kv_total_pages", "gauge", "Pages in the KV pool.", stats.total_pages),
            ("serve_kv_free_pages", "gauge", "Pages on the free list.", stats.free_pages),
            ("serve_kv_cached_pages", "gauge", "Pages held by the prefix cache.", stats.cached_pages),
            (
                "serve_kv_usage_ratio",
                "gauge",
                "Fraction of the pool held by requests (neither free nor evictable).",
                stats.token_usage,
            ),
            (
                "serve_cache_hit_rate",
                "gauge",
                "Fraction of admitted prompt tokens served from the prefix cache.",
                stats.cache_hit_rate,
            ),
            ("serve_retractions_total", "counter", "Requests retracted to free KV pages.", stats.num_retractions),
            *(speculative_rows(stats) if stats.spec_accept_length_counts else ()),
            (
                "serve_num_grammar_waiting_requests",
                "gauge",
                "Queued requests whose output constraint is still compiling.",
                stats.num_grammar_waiting,
            ),
            (
                "serve_grammar_compiles_total",
                "counter",
                "Output constraints compiled (cache misses).",
                stats.grammar_compiles,
            ),
            (
                "serve_grammar_cache_hits_total",
                "counter",
                "Constrained requests served from an already compiled grammar.",
                stats.grammar_cache_hits,
            ),
            (
                "serve_grammar_compile_seconds_total",
                "counter",
                "Time spent compiling output constraints.",
                stats.grammar_compile_seconds,
            ),
        ]


# Each replica's own gauges and counters (name, kind, help, value of its stats).
_REPLICA_ROWS: tuple[tuple[str, str, str, Callable[[SchedulerMetrics], float]], ...] = (
    ("serve_replica_num_running_requests", "gauge", "Requests in a replica's running batch.", lambda s: s.num_running),
    (
        "serve_replica_num_waiting_requests",
        "gauge",
        "Requests waiting for admission at a replica.",
        lambda s: s.num_waiting,
    ),
    ("serve_replica_kv_free_pages", "gauge", "Pages on a replica's free list.", lambda s: s.free_pages),
    (
        "serve_replica_kv_usage_ratio",
        "gauge",
        "Fraction of a replica's pool held by requests.",
        lambda s: s.token_usage,
    ),
    (
        "serve_replica_cache_hit_rate",
        "gauge",
        "Fraction of a replica's admitted prompt tokens served from its prefix cache.",
        lambda s: s.cache_hit_rate,
    ),
    ("serve_replica_requests_finished_total", "counter", "Requests a replica finished.", lambda s: s.num_finished),
    (
        "serve_replica_requests_aborted_total",
        "counter",
        "Requests a replica stopped early (client gone, stop string).",
        lambda s: s.num_aborted,
    ),
)
