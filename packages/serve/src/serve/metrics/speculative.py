"""Speculative decoding's figures, from the scheduler's totals, named like the peers' (SGLang's
accept length and acceptance rate, vLLM's draft and accepted token counters)."""

from __future__ import annotations

from typing import Any

from runtime_scheduler import SchedulerMetrics
from serve.metrics.histogram import Histogram


def accept_length_of(stats: SchedulerMetrics) -> float:
    """Mean tokens one verify gave a request (its accepted drafts plus the target's next token);
    0 before the first verify."""
    counts = stats.spec_accept_length_counts
    verifies = sum(counts)
    return sum(n * c for n, c in enumerate(counts)) / verifies if verifies else 0.0


def acceptance_rate_of(stats: SchedulerMetrics) -> float:
    """Accepted drafts over proposed drafts; 0 before the first verify."""
    return stats.spec_accepted_tokens / stats.spec_draft_tokens if stats.spec_draft_tokens else 0.0


def speculative_summary(stats: SchedulerMetrics) -> dict[str, Any]:
    """/server_info's speculative section."""
    return {
        "verify_steps": stats.spec_verify_steps,
        "request_verifies": sum(stats.spec_accept_length_counts),
        "draft_tokens": stats.spec_draft_tokens,
        "accepted_tokens": stats.spec_accepted_tokens,
        "accept_length": accept_length_of(stats),
        "acceptance_rate": acceptance_rate_of(stats),
        "accept_length_counts": list(stats.spec_accept_length_counts),
    }


def speculative_rows(stats: SchedulerMetrics) -> list[tuple[str, str, str, float]]:
    """/metrics' speculative counters and gauges (name, kind, help, value)."""
    return [
        ("serve_spec_verify_steps_total", "counter", "Target verify forwards run.", stats.spec_verify_steps),
        ("serve_spec_draft_tokens_total", "counter", "Draft tokens proposed and verified.", stats.spec_draft_tokens),
        (
            "serve_spec_accepted_tokens_total",
            "counter",
            "Draft tokens the target accepted.",
            stats.spec_accepted_tokens,
        ),
        (
            "serve_spec_accept_rate",
            "gauge",
            "Accepted draft tokens over proposed ones, since start.",
            acceptance_rate_of(stats),
        ),
        (
            "serve_spec_accept_length_mean",
            "gauge",
            "Mean tokens one verify gave a request, since start.",
            accept_length_of(stats),
        ),
    ]


def accept_length_histogram(stats: SchedulerMetrics) -> Histogram:
    """/metrics' accept-length histogram: tokens one verify gave a request."""
    return Histogram.of_integer_counts(
        "serve_spec_accept_length",
        "Tokens one verify gave a request (accepted drafts plus one).",
        stats.spec_accept_length_counts,
    )
