"""Deterministic inference end to end on the default model in bf16: a request's tokens and
logprobs are bitwise the same however it is served. 32 requests (greedy and seeded-sampled, half of
them sharing a preamble) are sent one at a time on a fresh server (the first of the preamble's
family cold, the others partial prefix hits), then all 32 together (full prefix hits at every
position of the batch), then one at a time again (full hits, alone); and on a second server with
16-token prefill chunks and a pool too small for the 32 at once, all together (cold prompts split
into chunks, mixed with decodes, and requests retracted and recomputed). Every answer equals the
first, token for token and logprob for logprob.

Reverse-verified by hand: with `--enable-deterministic-inference false` (oneDNN/aten matmuls,
SDPA prompts) the 32-together round differs from the one-at-a-time round in most requests (their
logprobs at least)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from serve_testing.polling import first_satisfying
from serve_testing.prometheus import metric_value
from serve_testing.server import ServerProcess

pytestmark = pytest.mark.timeout(1200)

PREAMBLE = (
    "You are a careful assistant who answers in plain words. Keep each answer short, name the one fact asked "
    "for, and do not add a greeting.\n\nQuestion: "
)
TOPICS = [
    "the tallest mountain",
    "the boiling point of water",
    "how bees make honey",
    "why the sky is blue",
    "the speed of light",
    "what a prime number is",
    "the largest ocean",
    "how rain forms",
    "the capital of Japan",
    "what photosynthesis does",
    "the first element",
    "how magnets work",
    "why leaves change color",
    "the longest river",
    "what an atom is",
    "how a rainbow forms",
]
PROMPTS = [PREAMBLE + f"What do you know about {t}?" for t in TOPICS] + [
    f"Write one sentence about {t}." if i % 2 else f"{t.capitalize()}: explain it to a child in a few words, then stop."
    for i, t in enumerate(TOPICS)
]
NEW_TOKENS = 20


def _body(i: int) -> dict[str, Any]:
    """Even requests greedy, odd ones sampled with a seed of their own."""
    sampling: dict[str, Any] = {"max_new_tokens": NEW_TOKENS, "ignore_eos": True, "temperature": 0}
    if i % 2:
        sampling.update(temperature=0.9, top_p=0.95, top_k=50, seed=1000 + i)
    return {"text": PROMPTS[i], "sampling_params": sampling, "return_logprob": True, "top_logprobs_num": 2}


Answer = tuple[list[int], list[Any], list[Any]]


def _answer(base_url: str, i: int) -> tuple[Answer, int]:
    """(the request's tokens, logprobs and top logprobs; its prompt tokens served from the cache)."""
    response = httpx.post(base_url + "/generate", json=_body(i), timeout=600)
    assert response.status_code == 200, response.text
    out = response.json()
    meta = out["meta_info"]
    return (out["output_ids"], meta["output_token_logprobs"], meta["output_top_logprobs"]), meta["cached_tokens"]


def _one_at_a_time(server: ServerProcess) -> tuple[list[Answer], list[int]]:
    pairs = [_answer(server.base_url, i) for i in range(len(PROMPTS))]
    return [a for a, _ in pairs], [c for _, c in pairs]


def _all_together(server: ServerProcess) -> tuple[list[Answer], list[int]]:
    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        pairs = list(pool.map(lambda i: _answer(server.base_url, i), range(len(PROMPTS))))
    return [a for a, _ in pairs], [c for _, c in pairs]


@pytest.fixture(scope="module")
def alone_cold() -> Iterator[tuple[ServerProcess, list[Answer], list[int]]]:
    """A default server (bf16, deterministic by default) and its first, one-at-a-time answers."""
    server = ServerProcess(None, "--max-total-tokens", "16384")
    try:
        server.wait_ready(timeout_s=420)
        answers, cached = _one_at_a_time(server)
        yield server, answers, cached
    finally:
        server.stop()


def _differing(got: list[Answer], expected: list[Answer]) -> list[int]:
    return [i for i, (a, b) in enumerate(zip(got, expected, strict=True)) if a != b]


def test_the_default_server_is_deterministic(alone_cold: tuple[ServerProcess, list[Answer], list[int]]) -> None:
    server, _, cached = alone_cold
    info = httpx.get(server.base_url + "/server_info", timeout=30).json()
    assert info["model"]["runners"]["target"] == {
        "prefill": "cpu_paged",
        "decode": "cpu_paged",
        "is_draft_override": False,
        "batch_invariant": True,
        "linear_attn": None,
    }
    assert info["bags"]["model"]["dtype"] in ("auto", "bfloat16")
    assert cached[0] == 0 and all(c > 0 for c in cached[1:16]), cached  # the preamble's family: cold, then partial hits


def test_together_with_every_prompt_cached_equals_alone(
    alone_cold: tuple[ServerProcess, list[Answer], list[int]],
) -> None:
    server, expected, _ = alone_cold
    together, cached = _all_together(server)
    assert all(c > 0 for c in cached), cached
    assert _differing(together, expected) == []
    again, _ = _one_at_a_time(server)
    assert _differing(again, expected) == []


def test_chunked_and_retracted_together_equals_alone(alone_cold: tuple[ServerProcess, list[Answer], list[int]]) -> None:
    _, expected, _ = alone_cold
    server = ServerProcess(None, "--max-total-tokens", "512", "--chunked-prefill-size", "16")
    try:
        server.wait_ready(timeout_s=420)
        together, _ = _all_together(server)
        retractions = first_satisfying(
            lambda: metric_value(httpx.get(server.base_url + "/metrics", timeout=30).text, "serve_retractions_total"),
            lambda n: n > 0,
        )
    finally:
        server.stop()
    assert retractions > 0
    assert _differing(together, expected) == []
