"""A Gated-DeltaNet hybrid served end to end: `serve --model-path DIR` on tiny Qwen3-Next
checkpoints, real processes and HTTP.

- 12 greedy requests sent together (several sharing a long prefix) answer transformers' fp32
  greedy output token for token, and a chat completion answers;
- /server_info shows each runner's linear-attention stamp: the device's cpu_fused for every phase,
  on the target and on a hybrid draft;
- a repeated prompt resumes from the recurrent-state snapshot at its cached prefix (snapshots
  every 16 tokens): the same tokens, `usage.prompt_tokens_details.cached_tokens` says how many
  were reused, and /metrics' prefix-cache hit rate counts them;
- a bad request gets an OpenAI-shaped 400 and the server keeps serving; a refused override of a
  linear-attention leaf changes nothing.

The identity is guarded in-process, where it was reverse-verified (tests/test_hybrid_parity.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from serve_testing.prometheus import metric_value
from serve_testing.server import ServerProcess
from serve_testing.tiny_hybrid_checkpoint import build_tiny_hybrid_checkpoint, reference_greedy

pytestmark = pytest.mark.timeout(900)

NEW_TOKENS = 10
_SHARED = [(3 * j) % 91 + 5 for j in range(48)]
PROMPTS = [[(11 * i + j) % 80 + 3 for j in range(6 + 2 * i)] for i in range(6)] + [
    _SHARED + [200 + i, 201 + i] for i in range(6)
]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[list[int]]]:
    target = build_tiny_hybrid_checkpoint(tmp_path_factory.mktemp("target"), family="qwen3_next")
    draft = build_tiny_hybrid_checkpoint(tmp_path_factory.mktemp("draft"), family="qwen3_5", seed=4)
    return target, draft, reference_greedy(target, PROMPTS, NEW_TOKENS)


def _server(*args: str | Path) -> Iterator[ServerProcess]:
    server = ServerProcess(Path(args[0]), "--dtype", "float32", *(str(a) for a in args[1:]))
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def hybrid_server(checkpoints: tuple[Path, Path, list[list[int]]]) -> Iterator[ServerProcess]:
    yield from _server(checkpoints[0], "--mamba-snapshot-interval", "16", "--chunked-prefill-size", "16")


@pytest.fixture(scope="module")
def hybrid_draft_server(checkpoints: tuple[Path, Path, list[list[int]]]) -> Iterator[ServerProcess]:
    target, draft, _ = checkpoints
    yield from _server(
        target,
        "--speculative-algorithm",
        "draft_model",
        "--speculative-draft-model-path",
        draft,
        "--speculative-num-steps",
        "3",
    )


def _ids(base_url: str, prompt: list[int]) -> list[int]:
    body = {
        "input_ids": prompt,
        "sampling_params": {"max_new_tokens": NEW_TOKENS, "ignore_eos": True, "temperature": 0},
    }
    response = httpx.post(base_url + "/generate", json=body, timeout=600)
    assert response.status_code == 200, response.text
    ids: list[int] = response.json()["output_ids"]
    return ids


def _together(base_url: str) -> list[list[int]]:
    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        return list(pool.map(lambda prompt: _ids(base_url, prompt), PROMPTS))


CPU_STAMP = {"decode": "cpu_fused", "prefill": "cpu_fused", "verify": "cpu_fused"}


def test_a_hybrid_answers_as_transformers_does(
    checkpoints: tuple[Path, Path, list[list[int]]], hybrid_server: ServerProcess
) -> None:
    base_url = hybrid_server.base_url
    assert _together(base_url) == checkpoints[2]
    chat = httpx.post(
        base_url + "/v1/chat/completions",
        json={"messages": [{"role": "user", "content": "hello"}], "max_tokens": 8},
        timeout=600,
    )
    assert chat.status_code == 200 and chat.json()["choices"][0]["message"]["content"] is not None
    info = httpx.get(base_url + "/server_info").json()
    assert info["model"]["runners"]["target"]["linear_attn"] == CPU_STAMP
    repeat = httpx.post(
        base_url + "/v1/completions",
        json={"prompt": PROMPTS[-1], "max_tokens": NEW_TOKENS, "ignore_eos": True, "temperature": 0},
        timeout=600,
    ).json()
    assert repeat["usage"]["prompt_tokens_details"]["cached_tokens"] == 48  # snapshots at 16, 32, 48
    assert _ids(base_url, PROMPTS[-1]) == checkpoints[2][-1]
    assert metric_value(httpx.get(base_url + "/metrics").text, "serve_cache_hit_rate") > 0.0
    assert info["model"]["recurrent_state_mb"] > 0 and info["model"]["state_snapshot_slots"] > 0


def test_a_bad_request_and_a_refused_override_change_nothing(
    checkpoints: tuple[Path, Path, list[list[int]]], hybrid_server: ServerProcess
) -> None:
    base_url = hybrid_server.base_url
    before = httpx.get(base_url + "/server_info").json()["config_hashes"]
    bad = httpx.post(
        base_url + "/generate", json={"input_ids": [10**6], "sampling_params": {"max_new_tokens": 2}}, timeout=60
    )
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "input_ids", bad.text
    refused = httpx.patch(base_url + "/v1/runtime_config", json={"linear_attn_decode_backend": "torch_native"})
    assert refused.status_code == 400 and "linear_attn_decode_backend" in refused.text
    assert httpx.get(base_url + "/server_info").json()["config_hashes"] == before
    assert _ids(base_url, PROMPTS[0]) == checkpoints[2][0]


def test_a_hybrid_draft_holds_its_own_stamp_and_keeps_the_output(
    checkpoints: tuple[Path, Path, list[list[int]]], hybrid_draft_server: ServerProcess
) -> None:
    base_url = hybrid_draft_server.base_url
    assert [_ids(base_url, prompt) for prompt in PROMPTS[:4]] == checkpoints[2][:4]
    runners = httpx.get(base_url + "/server_info").json()["model"]["runners"]
    assert runners["target"]["linear_attn"] == runners["draft"]["linear_attn"] == CPU_STAMP
