"""End to end: the real server (a subprocess on a free port, the tiny checkpoint) over HTTP with the
official `openai` client and plain httpx. One server for the module."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from serve_testing.polling import first_satisfying
from serve_testing.prometheus import metric_value
from serve_testing.server import ServerProcess
from serve_testing.tiny_checkpoint import build_tiny_checkpoint

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / "tiny-llama")


@pytest.fixture(scope="module")
def server(model_dir: Path) -> Iterator[ServerProcess]:
    # float32: on CPU "auto" serves float32 checkpoints in bf16, whose rounding differs between
    # batch shapes enough to flip greedy choices of a random model.
    running = ServerProcess(model_dir, "--max-total-tokens", "65536", "--device", "cpu", "--dtype", "float32")
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.base_url, timeout=120) as c:
        yield c


MODEL = "tiny-llama"
GREEDY: dict[str, Any] = {"temperature": 0.0, "extra_body": {"ignore_eos": True}}


def greedy_ids(http: httpx.Client, prompt: str, n: int) -> list[int]:
    body = {"text": prompt, "sampling_params": {"max_new_tokens": n, "temperature": 0, "ignore_eos": True}}
    response = http.post("/generate", json=body)
    assert response.status_code == 200, response.text
    ids: list[int] = response.json()["output_ids"]
    return ids


def metric(http: httpx.Client, name: str) -> float:
    return metric_value(http.get("/metrics").text, name)


def test_greedy_tokens_equal_transformers_generate(http: httpx.Client, model_dir: Path) -> None:
    """The served greedy continuation is token for token what transformers' generate gives."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    prompt_ids = tokenizer.encode("The quick brown fox")
    reference = model.generate(torch.tensor([prompt_ids]), max_new_tokens=12, do_sample=False, eos_token_id=None)[
        0, len(prompt_ids) :
    ]
    body = {"input_ids": prompt_ids, "sampling_params": {"max_new_tokens": 12, "temperature": 0, "ignore_eos": True}}
    assert http.post("/generate", json=body).json()["output_ids"] == reference.tolist()


def test_completion_with_the_openai_client(client: openai.OpenAI, http: httpx.Client) -> None:
    completion = client.completions.create(model=MODEL, prompt="Hello world", max_tokens=8, **GREEDY)
    choice = completion.choices[0]
    assert choice.finish_reason == "length"
    assert completion.usage is not None and completion.usage.completion_tokens == 8
    assert completion.usage.prompt_tokens == len(
        http.post("/tokenize", json={"prompt": "Hello world"}).json()["tokens"]
    )
    ids = greedy_ids(http, "Hello world", 8)
    assert choice.text == http.post("/detokenize", json={"tokens": ids}).json()["prompt"]


def test_chat_streamed_equals_whole(client: openai.OpenAI) -> None:
    messages: Any = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is the capital of France?"},
    ]
    whole = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=20, **GREEDY)
    stream = client.chat.completions.create(
        model=MODEL, messages=messages, max_tokens=20, stream=True, stream_options={"include_usage": True}, **GREEDY
    )
    pieces, finish, usage = [], None, None
    for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for choice in chunk.choices:
            pieces.append(choice.delta.content or "")
            finish = choice.finish_reason or finish
    assert whole.choices[0].message.role == "assistant"
    assert "".join(pieces) == whole.choices[0].message.content
    assert finish == "length" and usage is not None and usage.completion_tokens == 20


def test_completion_stream_with_n_choices(client: openai.OpenAI) -> None:
    stream = client.completions.create(
        model=MODEL, prompt="Numbers:", max_tokens=6, n=3, stream=True, temperature=1.0, seed=7
    )
    texts = {0: "", 1: "", 2: ""}
    finished = set()
    for chunk in stream:
        for choice in chunk.choices:
            texts[choice.index] += choice.text
            if choice.finish_reason is not None:
                finished.add(choice.index)
    assert finished == {0, 1, 2}
    again = client.completions.create(model=MODEL, prompt="Numbers:", max_tokens=6, n=3, temperature=1.0, seed=7)
    assert [c.text for c in again.choices] == [texts[0], texts[1], texts[2]]


def test_stop_string_truncates_and_reports(client: openai.OpenAI) -> None:
    """Reverse-verified: with the detokenizer's stop-string match removed the text runs to max_tokens."""
    full = client.completions.create(model=MODEL, prompt="Paris is", max_tokens=24, **GREEDY).choices[0].text
    start = next(i for i in range(3, len(full) - 2) if "\ufffd" not in full[i : i + 2] and full[i : i + 2].strip())
    stop = full[start : start + 2]
    expected = full[: full.find(stop)]
    whole = client.completions.create(model=MODEL, prompt="Paris is", max_tokens=24, stop=[stop], **GREEDY).choices[0]
    assert (whole.text, whole.finish_reason) == (expected, "stop")
    assert whole.model_extra is not None and whole.model_extra["matched_stop"] == stop
    streamed = client.completions.create(
        model=MODEL, prompt="Paris is", max_tokens=24, stop=stop, stream=True, **GREEDY
    )
    assert "".join(c.choices[0].text for c in streamed if c.choices) == expected


def test_stop_token_ids(http: httpx.Client) -> None:
    ids = greedy_ids(http, "All that glitters", 16)
    stop_id = ids[4]
    body = {
        "text": "All that glitters",
        "sampling_params": {"max_new_tokens": 16, "temperature": 0, "stop_token_ids": [stop_id]},
    }
    answer = http.post("/generate", json=body).json()
    assert answer["output_ids"] == ids[: ids.index(stop_id) + 1]
    assert answer["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop_id}


def test_logprobs_completion_and_chat(client: openai.OpenAI) -> None:
    completion = client.completions.create(model=MODEL, prompt="To be or", max_tokens=5, logprobs=3, **GREEDY)
    logprobs = completion.choices[0].logprobs
    assert logprobs is not None and logprobs.tokens is not None and logprobs.token_logprobs is not None
    assert len(logprobs.tokens) == 5
    assert logprobs.top_logprobs is not None
    for chosen, top in zip(logprobs.token_logprobs, logprobs.top_logprobs, strict=True):
        assert 1 <= len(top) <= 3
        assert chosen == pytest.approx(max(top.values()), abs=1e-5)  # greedy picks the top token
        assert chosen <= 0.0
    chat = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=4, logprobs=True, top_logprobs=2, **GREEDY
    )
    content = chat.choices[0].logprobs.content if chat.choices[0].logprobs else None
    assert content is not None and len(content) == 4
    assert all(
        len(entry.top_logprobs) == 2 and entry.logprob == pytest.approx(entry.top_logprobs[0].logprob, abs=1e-5)
        for entry in content
    )


def test_32_concurrent_requests_equal_one_at_a_time(server: ServerProcess, http: httpx.Client) -> None:
    """Continuous batching does not change greedy outputs."""
    prompts = [f"Request {i}: " + "the quick brown fox " * (i % 7) for i in range(32)]
    lengths = [4 + (i * 5) % 13 for i in range(32)]
    sequential = [greedy_ids(http, p, n) for p, n in zip(prompts, lengths, strict=True)]

    async def all_at_once() -> list[list[int]]:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=120) as ac:
            bodies = [
                {"text": p, "sampling_params": {"max_new_tokens": n, "temperature": 0, "ignore_eos": True}}
                for p, n in zip(prompts, lengths, strict=True)
            ]
            responses = await asyncio.gather(*(ac.post("/generate", json=b) for b in bodies))
        return [r.json()["output_ids"] for r in responses]

    assert asyncio.run(all_at_once()) == sequential


def test_runtime_override_under_load(server: ServerProcess, http: httpx.Client) -> None:
    """An override applied while requests run reaches every process (all report the new hash),
    and the running requests finish with unchanged greedy outputs."""
    prompts = [f"Load {i} " + "glitters " * i for i in range(12)]
    reference = [greedy_ids(http, p, 24) for p in prompts]
    before = http.get("/server_info").json()["config_hashes"]
    assert len(set(before.values())) == 1
    results: list[list[int]] = []

    async def load_and_patch() -> dict[str, Any]:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=120) as ac:
            bodies = [
                {"text": p, "sampling_params": {"max_new_tokens": 24, "temperature": 0, "ignore_eos": True}}
                for p in prompts
            ]
            running = [asyncio.create_task(ac.post("/generate", json=b)) for b in bodies]
            await asyncio.sleep(0.3)
            patched = await ac.patch("/v1/runtime_config", json={"max_running_requests": 3, "chunked_prefill_size": 8})
            results.extend(r.json()["output_ids"] for r in await asyncio.gather(*running))
            return {"status": patched.status_code, **patched.json()}

    try:
        patched = asyncio.run(load_and_patch())
        assert patched["status"] == 200, patched
        info = http.get("/server_info").json()
        assert (
            set(info["config_hashes"].values()) == {patched["config_hash"]} and patched["config_hash"] != before["main"]
        )
        assert info["bags"]["schedule"]["max_running_requests"] == 3
        assert info["overrides"][-1]["source"] == "http:PATCH /v1/runtime_config"
        assert info["provenance"]["max_running_requests"] == "override:http:PATCH /v1/runtime_config"
        assert info["config"]["leaves"]["max_running_requests"]["value"] == 3
        shown = http.get("/v1/runtime_config").json()
        assert shown["leaves"]["max_running_requests"]["value"] == 3 and shown["config_hash"] == patched["config_hash"]
        assert results == reference
    finally:
        restored = http.patch("/v1/runtime_config", json={"max_running_requests": 256, "chunked_prefill_size": 2048})
        assert restored.status_code == 200 and restored.json()["config_hash"] == before["main"]


@pytest.mark.parametrize(
    ("leaves", "needle"),
    [
        ({"page_size": 16}, "cold leaf"),
        ({"max_running_requests": 0}, "max_running_requests"),
        ({"max_runing_requests": 4}, "did you mean max_running_requests"),
        ({"max_n": 4, "page_size": 2}, "page_size"),
        ({"schedule_policy": "random"}, "one of fcfs, lpm"),
        ({}, "no leaves"),
    ],
)
def test_refused_override_changes_nothing(http: httpx.Client, leaves: dict[str, Any], needle: str) -> None:
    """Reverse-verified: without the front end's cold-leaf check a cold change reached the
    children, which refused it, and the client got a 500 instead of this 400."""
    before = http.get("/server_info").json()
    response = http.patch("/v1/runtime_config", json=leaves)
    assert response.status_code == 400, response.text
    assert needle in response.json()["error"]["message"]
    after = http.get("/server_info").json()
    assert after["config_hashes"] == before["config_hashes"] and after["bags"] == before["bags"]


def test_client_disconnect_aborts_and_frees_pages(server: ServerProcess, http: httpx.Client) -> None:
    """Reverse-verified: without the AbortRequest sent when a handler leaves early, the request
    keeps running to its 3000 tokens and the pool stays held."""
    aborted_before = metric(http, "serve_requests_aborted_total")
    body = {"model": MODEL, "prompt": "Hello", "max_tokens": 3000, "stream": True, "temperature": 0, "ignore_eos": True}
    with (
        httpx.Client(base_url=server.base_url, timeout=60) as c,
        c.stream("POST", "/v1/completions", json=body) as response,
    ):
        lines = response.iter_lines()
        for _ in range(6):
            next(lines)
        first_satisfying(lambda: metric(http, "serve_num_running_requests"), lambda running: running == 1)
        assert metric(http, "serve_kv_usage_ratio") > 0
    names = ("serve_num_running_requests", "serve_kv_usage_ratio", "serve_requests_aborted_total")
    settled = first_satisfying(
        lambda: tuple(metric(http, name) for name in names), lambda values: values == (0, 0, aborted_before + 1)
    )
    assert settled == (0, 0, aborted_before + 1)


def test_models_server_info_and_metrics(http: httpx.Client) -> None:
    models = http.get("/v1/models").json()
    assert [m["id"] for m in models["data"]] == [MODEL] and models["data"][0]["max_model_len"] == 4096
    info = http.get("/server_info").json()
    assert set(info["config_hashes"]) == {"main", "scheduler", "detokenizer"}
    assert len(set(info["config_hashes"].values())) == 1
    assert info["provenance"]["max_total_tokens"] == "cli"
    assert info["config"]["leaves"]["model_path"]["value"].endswith(MODEL)
    text = http.get("/metrics").text
    for name in (
        "serve_gen_throughput_tokens_per_second",
        "serve_time_to_first_token_seconds_bucket",
        "serve_inter_token_latency_seconds_bucket",
        "serve_num_running_requests",
        "serve_num_waiting_requests",
        "serve_cache_hit_rate",
        "serve_retractions_total",
    ):
        assert name in text
    assert metric(http, "serve_generation_tokens_total") > 0
    assert metric(http, "serve_time_to_first_token_seconds_count") > 0


def test_tokenize_and_detokenize_round_trip(http: httpx.Client) -> None:
    text = "Héllo wörld, 東京 😀"
    tokens = http.post("/tokenize", json={"prompt": text}).json()
    assert tokens["count"] == len(tokens["tokens"]) and tokens["max_model_len"] == 4096
    assert http.post("/detokenize", json={"tokens": tokens["tokens"]}).json()["prompt"] == text
    chat = http.post("/tokenize", json={"messages": [{"role": "user", "content": "hi"}]}).json()
    assert (
        http.post("/detokenize", json={"tokens": chat["tokens"]}).json()["prompt"]
        == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_native_generate_streams_pieces(server: ServerProcess, http: httpx.Client) -> None:
    ids = greedy_ids(http, "A journey", 10)
    body = {
        "text": "A journey",
        "stream": True,
        "sampling_params": {"max_new_tokens": 10, "temperature": 0, "ignore_eos": True},
    }
    streamed: list[int] = []
    with http.stream("POST", "/generate", json=body) as response:
        for line in response.iter_lines():
            if line.startswith("data: {"):
                import json

                streamed.extend(json.loads(line[6:])["output_ids"])
    assert streamed == ids


def test_full_waiting_queue_refuses_with_503(server: ServerProcess, http: httpx.Client) -> None:
    """schedule.max_queued_requests is hot and read by the scheduler at admission: lowered at run
    time, the requests beyond it are refused with a 503 naming the limit, the rest are served.

    One request runs at a time and each decodes 48 tokens, so the burst's requests arrive while the
    first still runs and queue behind it, however fast a step is (with 4 tokens and no running
    limit, a fast runner drained the queue between arrivals and nothing was refused). Reverse-verified:
    passing no limit to the scheduler's admission check makes every request a 200 and fails."""
    running = http.get("/v1/runtime_config").json()["leaves"]["max_running_requests"]["value"]
    assert (
        http.patch("/v1/runtime_config", json={"max_queued_requests": 1, "max_running_requests": 1}).status_code == 200
    )

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=server.base_url, timeout=120) as ac:
            body = {"model": MODEL, "prompt": "Hello", "max_tokens": 48, "temperature": 0, "ignore_eos": True}
            return list(await asyncio.gather(*(ac.post("/v1/completions", json=body) for _ in range(8))))

    try:
        responses = asyncio.run(burst())
    finally:
        restored = {"max_queued_requests": None, "max_running_requests": running}
        assert http.patch("/v1/runtime_config", json=restored).status_code == 200
    statuses = [r.status_code for r in responses]
    assert 200 in statuses and 503 in statuses and set(statuses) <= {200, 503}
    refused = next(r for r in responses if r.status_code == 503)
    assert "max_queued_requests=1" in refused.json()["error"]["message"]
    after = http.post("/v1/completions", json={"model": MODEL, "prompt": "Hello", "max_tokens": 2})
    assert after.status_code == 200


def test_sampling_parameters_reach_the_sampler(client: openai.OpenAI, http: httpx.Client) -> None:
    """top_k=1 (or a min_p of 1) at temperature 1 is greedy; penalties change a repetitive greedy text."""
    greedy = greedy_ids(http, "Numbers: 0 1 2", 24)
    for extra in ({"top_k": 1}, {"min_p": 1.0}):
        body = {
            "text": "Numbers: 0 1 2",
            "sampling_params": {"max_new_tokens": 24, "temperature": 1.0, "ignore_eos": True, **extra},
        }
        assert http.post("/generate", json=body).json()["output_ids"] == greedy, extra
    assert len(set(greedy)) < len(greedy)  # the tiny model repeats itself
    for penalty in ("frequency_penalty", "presence_penalty"):
        body = {
            "text": "Numbers: 0 1 2",
            "sampling_params": {"max_new_tokens": 24, "temperature": 0, "ignore_eos": True, penalty: 2.0},
        }
        penalized = http.post("/generate", json=body).json()["output_ids"]
        assert penalized != greedy and len(set(penalized)) > len(set(greedy)), penalty


def test_ready_means_every_process_is_up(model_dir: Path) -> None:
    """The server announces itself ready only once its tokenizer worker has loaded too, so /health
    answers 200 at once: a worker still loading took the CPU from the first requests and halved
    their decode rate on a 2-core machine.

    Reverse-verified by hand: without the launcher's wait for the worker, /health answered 503
    ("starting: the tokenizer worker is loading") right after the ready line."""
    running = ServerProcess(model_dir, "--device", "cpu", "--dtype", "float32")
    try:
        running.wait_announced()
        assert running.health() == 200, running.log()
    finally:
        running.stop()
