"""End to end: `serve --dp-size 2`, two scheduler processes each with its own runner, KV pool and
prefix cache, behind the one HTTP and tokenizer process and the one detokenizer. One server for
the module.

A single-replica server's greedy tokens are transformers' (tests/test_e2e_serving.py pins it,
batched 32 at a time too), so transformers' tokens are what one replica answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from serve_testing.polling import first_satisfying
from serve_testing.prometheus import metric_value
from serve_testing.server import ServerProcess
from serve_testing.tiny_checkpoint import build_tiny_checkpoint

pytestmark = pytest.mark.timeout(600)

REPLICAS = ("scheduler.dp0.tp0", "scheduler.dp1.tp0")
NEW_TOKENS = 8


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "tiny-llama")


@pytest.fixture(scope="module")
def server(model_dir: Path) -> Iterator[ServerProcess]:
    running = ServerProcess(
        model_dir, "--dp-size", "2", "--max-total-tokens", "8192", "--device", "cpu", "--dtype", "float32"
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


def per_replica(http: httpx.Client, name: str) -> list[float]:
    """Each replica's sample of `name` in /metrics, by replica."""
    exposition = http.get("/metrics").text
    return [metric_value(exposition, f'{name}{{replica="{replica}"}}') for replica in range(len(REPLICAS))]


def settled(http: httpx.Client, name: str, want: float) -> list[float]:
    """Each replica's `name` once their sum is `want`, or as they are at the deadline (each replica
    reports a few times a second)."""
    return first_satisfying(lambda: per_replica(http, name), lambda values: sum(values) == want)


def test_64_concurrent_requests_are_answered_as_one_replica_answers(
    server: ServerProcess, http: httpx.Client, model_dir: Path
) -> None:
    """Reverse-verified: with the router answering replica 0 for every request, replica 1 finished
    none and the test failed on it."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    generator = torch.Generator().manual_seed(11)
    prompts = [
        torch.randint(3, 384, (int(n),), generator=generator).tolist()
        for n in torch.randint(4, 40, (64,), generator=generator)
    ]
    with torch.inference_mode():
        reference = [
            model.generate(torch.tensor([p]), max_new_tokens=NEW_TOKENS, do_sample=False, eos_token_id=None)[
                0, len(p) :
            ].tolist()
            for p in prompts
        ]
    finished_before = per_replica(http, "serve_replica_requests_finished_total")

    async def all_at_once() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=300) as client:
            bodies = [
                {
                    "input_ids": p,
                    "sampling_params": {"max_new_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True},
                }
                for p in prompts
            ]
            return list(await asyncio.gather(*(client.post("/generate", json=body) for body in bodies)))

    answers = asyncio.run(all_at_once())
    assert [a.status_code for a in answers] == [200] * 64
    assert [a.json()["output_ids"] for a in answers] == reference
    finished = settled(http, "serve_replica_requests_finished_total", sum(finished_before) + 64)
    served = [after - before for after, before in zip(finished, finished_before, strict=True)]
    assert sum(served) == 64 and min(served) > 0, f"requests finished per replica: {served}"


def test_a_stop_string_aborts_the_request_at_its_own_replica(http: httpx.Client) -> None:
    """The detokenizer sends a stop string's abort to the replica serving the request, which stops
    it there rather than generating on to max_new_tokens.

    Two requests sent together go one to each replica while the first is in flight; a request
    stops within a few tokens, so on a slow machine the first can finish before the second is
    routed, and both land (and abort) on replica 0. Such a pair says nothing about abort routing,
    so the pair is sent again, up to three times, until one lands on each replica.

    Reverse-verified (with the retries too): with every such abort sent to replica 0, replica 1
    counted no abort and the test failed on the placement check."""
    found = http.post(
        "/generate",
        json={"text": "Paris", "sampling_params": {"max_new_tokens": 6, "temperature": 0, "ignore_eos": True}},
    ).json()
    stop = http.post("/detokenize", json={"tokens": found["output_ids"][2:4]}).json()["prompt"]
    assert stop, found
    bodies = [
        {
            "text": "Paris",
            "sampling_params": {"max_new_tokens": 3000, "temperature": 0, "ignore_eos": True, "stop": [stop]},
        }
    ] * 2

    async def together() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=http.base_url, timeout=300) as client:
            return list(await asyncio.gather(*(client.post("/generate", json=body) for body in bodies)))

    placements = []
    for _ in range(3):
        aborted_before = per_replica(http, "serve_replica_requests_aborted_total")
        answers = asyncio.run(together())
        assert all(a.status_code == 200 and a.json()["meta_info"]["completion_tokens"] < 10 for a in answers), [
            a.text for a in answers
        ]
        aborted = settled(http, "serve_replica_requests_aborted_total", sum(aborted_before) + 2)
        placements.append([after - before for after, before in zip(aborted, aborted_before, strict=True)])
        if placements[-1] == [1, 1]:
            return
        assert placements[-1] == [2, 0], placements  # both on replica 0: the first finished before the second came
    pytest.fail(f"no pair of requests was split over the two replicas in three tries: {placements}")


def test_every_replica_acknowledges_an_override_with_one_hash(http: httpx.Client) -> None:
    """Reverse-verified: with the override sent to the first replica only, the PATCH waited out the
    override timeout and answered a 500."""
    patched = http.patch("/v1/runtime_config", json={"max_running_requests": 16})
    assert patched.status_code == 200, patched.text
    hashes = patched.json()["config_hashes"]
    assert set(hashes) == {"main", "detokenizer", *REPLICAS} and set(hashes.values()) == {patched.json()["config_hash"]}
    info = http.get("/server_info").json()
    assert {p["config_hash"] for p in info["processes"].values()} == {patched.json()["config_hash"]}
    assert [r["replica"] for r in info["replicas"]] == [0, 1] and all(
        r["pool_and_queue"] is not None for r in info["replicas"]
    )
