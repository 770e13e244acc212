"""Speculative decoding end to end: real servers, real HTTP, both algorithms.

- The default model under `--speculative-algorithm ngram` answers the README request and 32
  requests (greedy, and sampled with a seed; copy-heavy and ordinary; sent all together) exactly
  as a server without speculation answers them one at a time; /metrics and /server_info report
  verify steps, accept length and acceptance rate.
- A tiny model under `--speculative-algorithm draft_model` with another tiny checkpoint as its
  draft (and the draft's own attention backend): greedy and seeded answers equal the plain
  server's; /server_info stamps the draft runner with is_draft_override.
- Aborts mid-verify leave the pool clean and the server serving; an override under speculation
  takes effect on the next step (the draft budget) and a refused one changes nothing.

The identity these servers show is guarded in-process, where it was reverse-verified:
tests/test_speculative_sampling.py fails with an acceptance test that accepts every draft.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from config_bags.server import SpecBag
from serve_testing.polling import first_satisfying
from serve_testing.prometheus import metric_value
from serve_testing.server import ServerProcess
from serve_testing.tiny_checkpoint import build_tiny_checkpoint

pytestmark = pytest.mark.timeout(1200)

README_MESSAGES = [{"role": "user", "content": "What is the capital of France?"}]
CODE = (
    "def area(width, height):\n    if width < 0 or height < 0:\n        raise ValueError('negative side')\n    return "
    "width * height\n"
)
COPY = [
    f"Repeat this function exactly:\n\n{CODE}",
    f"Rename `width` to `w` in this function and print it:\n\n{CODE}",
    "Quote back word for word: the quick brown fox jumps over the lazy dog, and the dog sleeps on.",
    "Copy this list exactly: apples, pears, plums, cherries, grapes, lemons, limes.",
]
CHAT = ["Name a large ocean.", "Why do cats purr?", "Give one tip for learning to cook.", "What is a prime number?"]
PROMPTS = [p for p in COPY + CHAT for _ in range(4)]  # 32
NEW_TOKENS = 24


def _body(i: int, prompt: str) -> dict[str, Any]:
    """Even requests greedy, odd ones sampled with a seed of their own."""
    sampling: dict[str, Any] = {"max_new_tokens": NEW_TOKENS, "ignore_eos": True, "temperature": 0}
    if i % 2:
        sampling.update(temperature=0.8, top_p=0.95, top_k=40, seed=500 + i, repetition_penalty=1.05)
    return {"text": prompt, "sampling_params": sampling}


def _ids(base_url: str, i: int, prompt: str) -> list[int]:
    response = httpx.post(base_url + "/generate", json=_body(i, prompt), timeout=600)
    assert response.status_code == 200, response.text
    ids: list[int] = response.json()["output_ids"]
    return ids


def _together(base_url: str, prompts: list[str]) -> list[list[int]]:
    with ThreadPoolExecutor(len(prompts)) as pool:
        return list(pool.map(lambda ip: _ids(base_url, *ip), enumerate(prompts)))


def _readme_answer(base_url: str) -> str:
    """The README's request, as its curl sends it (temperature 1) plus a seed. Without one its draws
    come from the server's shared generator, which a verify step advances at every position it
    samples, so only greedy and seeded answers are promised token for token: unseeded, the ngram
    server once sampled past the EOS where the plain one stopped, on an AVX-512 machine."""
    body = {"messages": README_MESSAGES, "seed": 11}
    response = httpx.post(base_url + "/v1/chat/completions", json=body, timeout=600)
    assert response.status_code == 200, response.text
    answer: str = response.json()["choices"][0]["message"]["content"]
    return answer


@pytest.fixture(scope="module")
def plain_default() -> Iterator[tuple[str, list[list[int]]]]:
    """The README answer and the 32 answers, one at a time, of a default server without speculation."""
    server = ServerProcess(None, "--max-total-tokens", "16384")
    try:
        server.wait_ready(timeout_s=420)
        readme = _readme_answer(server.base_url)
        yield readme, [_ids(server.base_url, i, p) for i, p in enumerate(PROMPTS)]
    finally:
        server.stop()


def test_ngram_serves_the_default_model_exactly_as_without_speculation(
    plain_default: tuple[str, list[list[int]]],
) -> None:
    readme, alone = plain_default
    server = ServerProcess(None, "--max-total-tokens", "16384", "--speculative-algorithm", "ngram")
    try:
        server.wait_ready(timeout_s=420)
        assert _readme_answer(server.base_url) == readme
        together = _together(server.base_url, PROMPTS)
        assert [i for i in range(len(PROMPTS)) if together[i] != alone[i]] == []
        assert [_ids(server.base_url, i, PROMPTS[i]) for i in (0, 1, 16)] == [alone[0], alone[1], alone[16]]
        metrics = httpx.get(server.base_url + "/metrics").text
        assert metric_value(metrics, "serve_spec_verify_steps_total") > 0
        assert metric_value(metrics, "serve_spec_accepted_tokens_total") > 0
        assert 1.0 < metric_value(metrics, "serve_spec_accept_length_mean")
        assert 0.0 < metric_value(metrics, "serve_spec_accept_rate") <= 1.0
        assert 'serve_spec_accept_length_bucket{le="1.0"}' in metrics
        info = httpx.get(server.base_url + "/server_info").json()
        speculative = info["speculative"]
        assert (
            speculative["algorithm"] == "ngram"
            and speculative["verify_steps"] > 0
            and speculative["accept_length"] > 1.0
        )
        assert set(info["model"]["runners"]) == {"target"}
    finally:
        server.stop()


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny target and a tiny draft of the same tokenizer (other weights)."""
    root = tmp_path_factory.mktemp("spec")
    return build_tiny_checkpoint(root / "target"), build_tiny_checkpoint(root / "draft", seed=1)


TINY_PROMPTS = [
    f"copy {i}: alpha beta gamma delta alpha beta gamma delta alpha beta" if i % 3 else f"plain {i} words here"
    for i in range(32)
]


@pytest.fixture(scope="module")
def tiny_plain(tiny_pair: tuple[Path, Path]) -> list[list[int]]:
    server = ServerProcess(tiny_pair[0], "--max-total-tokens", "65536")
    try:
        server.wait_ready()
        return [_ids(server.base_url, i, p) for i, p in enumerate(TINY_PROMPTS)]
    finally:
        server.stop()


@pytest.fixture(scope="module")
def tiny_draft_server(tiny_pair: tuple[Path, Path]) -> Iterator[ServerProcess]:
    target, draft = tiny_pair
    server = ServerProcess(
        target,
        "--max-total-tokens",
        "65536",
        "--speculative-algorithm",
        "draft_model",
        "--speculative-draft-model-path",
        str(draft),
        "--speculative-num-steps",
        "3",
        "--speculative-draft-attention-backend",
        "cpu_paged",
    )
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def test_a_draft_model_serves_the_tiny_model_exactly_as_without_speculation(
    tiny_plain: list[list[int]], tiny_draft_server: ServerProcess
) -> None:
    base_url = tiny_draft_server.base_url
    assert _together(base_url, TINY_PROMPTS) == tiny_plain
    assert [_ids(base_url, i, TINY_PROMPTS[i]) for i in range(3)] == tiny_plain[:3]
    # The 32 sent together decode in steps above the CPU's speculation batch limit, so the verifies
    # counted may all be the last three requests', whose stats can arrive after their answers.
    info = first_satisfying(
        lambda: httpx.get(base_url + "/server_info").json(), lambda i: i["speculative"]["verify_steps"] > 0
    )
    runners = info["model"]["runners"]
    assert runners["draft"] == {
        "prefill": "cpu_paged",
        "decode": "cpu_paged",
        "is_draft_override": True,
        "batch_invariant": True,
        "linear_attn": None,
    }
    assert runners["target"]["is_draft_override"] is False
    assert info["speculative"]["algorithm"] == "draft_model" and info["speculative"]["verify_steps"] > 0


def _pool(base_url: str) -> dict[str, int]:
    pool: dict[str, int] = httpx.get(base_url + "/server_info").json()["pool_and_queue"]
    return pool


def test_an_abort_mid_verify_leaves_the_pool_clean_and_the_server_serving(
    tiny_plain: list[list[int]], tiny_draft_server: ServerProcess
) -> None:
    base_url = tiny_draft_server.base_url
    for _ in range(3):
        body = {
            "text": TINY_PROMPTS[1],
            "sampling_params": {"max_new_tokens": 400, "ignore_eos": True, "temperature": 0},
            "stream": True,
        }
        with httpx.stream("POST", base_url + "/generate", json=body, timeout=60) as response:
            for count, _line in enumerate(response.iter_lines()):
                if count >= 6:
                    break  # the client goes away while its request is verifying
    # A loaded machine once left one running past 30 s.
    pool = first_satisfying(
        lambda: _pool(base_url),
        lambda p: p["running"] == 0 and p["free_pages"] + p["cached_pages"] == p["total_pages"],
        timeout_s=90,
    )
    assert pool["running"] == 0 and pool["waiting"] == 0
    assert pool["free_pages"] + pool["cached_pages"] == pool["total_pages"]
    assert _ids(base_url, 1, TINY_PROMPTS[1]) == tiny_plain[1]


def _grown(before: list[int], after: list[int]) -> list[int]:
    """The accept lengths whose counts grew from `before` to `after`."""
    return [n for n in range(len(after)) if after[n] > (before[n] if n < len(before) else 0)]


def _settled_accept_length_counts(base_url: str) -> list[int]:
    """The accept-length counts once two reads half a second apart agree: earlier requests' stats have all arrived."""
    previous: list[int] | None = None
    deadline = time.monotonic() + 15
    while True:
        counts: list[int] = httpx.get(base_url + "/server_info").json()["speculative"]["accept_length_counts"]
        if counts == previous or time.monotonic() > deadline:
            return counts
        previous = counts
        time.sleep(0.5)


def test_an_override_under_speculation_applies_and_a_refused_one_changes_nothing(
    tiny_plain: list[list[int]], tiny_draft_server: ServerProcess
) -> None:
    base_url = tiny_draft_server.base_url
    before = httpx.get(base_url + "/server_info").json()
    refused = httpx.patch(base_url + "/v1/runtime_config", json={"speculative_eagle_topk": 2})
    assert refused.status_code == 400 and "speculative_eagle_topk" in refused.text
    assert httpx.get(base_url + "/server_info").json()["config_hashes"] == before["config_hashes"]
    patched = httpx.patch(base_url + "/v1/runtime_config", json={"speculative_num_draft_tokens": 2})
    assert patched.status_code == 200, patched.text
    try:
        counts_before = _settled_accept_length_counts(base_url)
        # One at a time: a batch above speculative_disable_by_batch_size (4 on a CPU) would not verify at all.
        assert [_ids(base_url, i, TINY_PROMPTS[i]) for i in range(3)] == tiny_plain[:3]
        counts_after = first_satisfying(
            lambda: httpx.get(base_url + "/server_info").json()["speculative"]["accept_length_counts"],
            lambda after: _grown(counts_before, after) != [],
        )
        grew = _grown(counts_before, counts_after)
        assert grew and max(grew) <= 2  # a verify now carries one draft: it gives a request 1 or 2 tokens
    finally:
        restored = httpx.patch(
            base_url + "/v1/runtime_config",
            json={"speculative_num_draft_tokens": SpecBag().speculative_num_draft_tokens},
        )
        assert restored.status_code == 200 and restored.json()["config_hash"] == before["config_hashes"]["main"]
