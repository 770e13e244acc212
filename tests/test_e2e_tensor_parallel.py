"""End to end: `serve --tp-size 2` on a CPU, two scheduler processes over gloo, each holding half of
the tiny checkpoint (4 heads, 2 KV heads, 128 intermediate rows: one KV head per rank), behind the
real HTTP server with the openai client. One server for the module; the last test kills one of its
ranks (keep it last).

A single-process server's greedy tokens are transformers' (tests/test_e2e_serving.py), so equal
tokens here are equal to one process's; tests/test_tensor_parallel_runner.py holds the logits.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from serve_testing.server import ServerProcess, process_alive
from serve_testing.tiny_checkpoint import build_tiny_checkpoint

pytestmark = pytest.mark.timeout(600)

MODEL = "tiny-llama"
RANKS = ("scheduler.dp0.tp0", "scheduler.dp0.tp1")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / MODEL)


@pytest.fixture(scope="module")
def server(model_dir: Path) -> Iterator[ServerProcess]:
    running = ServerProcess(
        model_dir, "--tp-size", "2", "--max-total-tokens", "8192", "--device", "cpu", "--dtype", "float32"
    )
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=120) as client:
        yield client


def test_greedy_tokens_equal_transformers_generate(http: httpx.Client, model_dir: Path) -> None:
    """Reverse-verified: with the o and down projections' partial products not summed across the
    ranks, the served tokens differed from the first one on."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    for text in ("The quick brown fox", "Paris is the capital of"):
        prompt_ids = tokenizer.encode(text)
        reference = model.generate(torch.tensor([prompt_ids]), max_new_tokens=12, do_sample=False, eos_token_id=None)[
            0, len(prompt_ids) :
        ]
        body = {
            "input_ids": prompt_ids,
            "sampling_params": {"max_new_tokens": 12, "temperature": 0, "ignore_eos": True},
        }
        assert http.post("/generate", json=body).json()["output_ids"] == reference.tolist(), text


def test_the_openai_client_is_served(server: ServerProcess, http: httpx.Client) -> None:
    client = openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)
    completion = client.completions.create(
        model=MODEL, prompt="Hello world", max_tokens=8, temperature=0.0, extra_body={"ignore_eos": True}
    )
    assert (
        completion.choices[0].finish_reason == "length"
        and completion.usage is not None
        and completion.usage.completion_tokens == 8
    )
    ids = http.post(
        "/generate",
        json={"text": "Hello world", "sampling_params": {"max_new_tokens": 8, "temperature": 0, "ignore_eos": True}},
    ).json()
    assert completion.choices[0].text == ids["text"]
    messages: list[dict[str, str]] = [{"role": "user", "content": "What is the capital of France?"}]
    stream = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=10, temperature=0.0, stream=True)  # type: ignore[arg-type]
    streamed = "".join(choice.delta.content or "" for chunk in stream for choice in chunk.choices)
    whole = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=10, temperature=0.0)  # type: ignore[arg-type]
    assert streamed == whole.choices[0].message.content


def test_every_rank_acknowledges_an_override_with_one_hash(http: httpx.Client) -> None:
    """Reverse-verified: with only the first rank acknowledging (the others' acks not gathered),
    the PATCH waited out the override timeout and answered a 500."""
    info = http.get("/server_info").json()
    assert {name: p["role"] for name, p in info["processes"].items()} == {
        "main": "http",
        "detokenizer": "detokenizer",
        RANKS[0]: "scheduler",
        RANKS[1]: "scheduler",
    }
    patched = http.patch("/v1/runtime_config", json={"max_running_requests": 8})
    assert patched.status_code == 200, patched.text
    hashes = patched.json()["config_hashes"]
    assert set(hashes) == {"main", "detokenizer", *RANKS} and set(hashes.values()) == {patched.json()["config_hash"]}
    assert http.post("/generate", json={"text": "Hello", "sampling_params": {"max_new_tokens": 3}}).status_code == 200


def test_killing_one_rank_fails_requests_and_ends_the_server(server: ServerProcess, http: httpx.Client) -> None:
    """Runs last: it takes the module's server down. As a killed scheduler does (test_e2e_faults):
    the request in flight gets a 503 naming the dead rank, /health turns unhealthy, the server
    exits 1, and no process is left.

    Reverse-verified: with the launcher watching only each replica's first rank, the 503 named
    scheduler.dp0.tp0, which died a moment later of its broken collective, not the rank killed."""
    pids = http.get("/server_info").json()["pids"]
    answers: list[httpx.Response] = []
    body = {"prompt": "Hello", "max_tokens": 3000, "temperature": 0, "ignore_eos": True}
    waiting = threading.Thread(target=lambda: answers.append(http.post("/v1/completions", json=body)))
    waiting.start()
    deadline = time.monotonic() + 20
    while "serve_num_running_requests 1" not in http.get("/metrics").text and time.monotonic() < deadline:
        time.sleep(0.1)
    os.kill(pids[RANKS[1]], signal.SIGKILL)
    waiting.join(60)
    assert answers and answers[0].status_code == 503, answers
    assert f"the {RANKS[1]} process died" in answers[0].json()["error"]["message"]
    health = http.get("/health")
    assert health.status_code == 503 and RANKS[1] in health.json()["reason"]
    assert server.process.wait(60) == 1
    for name in (*RANKS, "detokenizer", "main"):
        assert not process_alive(pids[name]), f"{name} process {pids[name]} outlived the launcher"
