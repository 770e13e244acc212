"""End to end: every process publishes its own role, serve runs with role checks enforced, and
serving every endpoint reads no namespace outside a process's role.

In enforce mode a read outside the role raises in the reading process (a 500 in the HTTP process, a
dead scheduler or detokenizer), so a clean pass over every endpoint with each process reporting
"enforce" is the assertion that no violation happened. The rest of the end-to-end suite runs under
the same enforcement, since it starts `serve` the same way.

Reverse-verified: with "exec" removed from the scheduler role's namespaces the scheduler died with
RoleViolationError reading `get_exec()` while building its runner and the server never became
ready; without the entry point's default, every process reported "off".
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from config_bags.server import ROLE_READS
from serve.main import ROLE_CHECK_ENV
from serve_testing.server import ServerProcess
from serve_testing.tiny_checkpoint import build_tiny_checkpoint

pytestmark = pytest.mark.timeout(600)

MODEL = "tiny-llama"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """`serve` started as an operator would, with no role-check mode in its environment."""
    with pytest.MonkeyPatch.context() as env:
        env.delenv(ROLE_CHECK_ENV, raising=False)
        running = ServerProcess(
            build_tiny_checkpoint(tmp_path_factory.mktemp("tiny") / MODEL),
            "--max-total-tokens",
            "4096",
            "--device",
            "cpu",
        )
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


def test_every_endpoint_serves_under_enforced_role_checks(server: ServerProcess) -> None:
    with httpx.Client(base_url=server.base_url, timeout=120) as http:
        completion = {"model": MODEL, "prompt": "Hello", "max_tokens": 4, "temperature": 0, "logprobs": 2}
        assert http.post("/v1/completions", json=completion).status_code == 200
        with http.stream("POST", "/v1/completions", json={**completion, "stream": True}) as streamed:
            assert streamed.status_code == 200 and "[DONE]" in streamed.read().decode()
        chat = {"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0}
        assert http.post("/v1/chat/completions", json=chat).status_code == 200
        assert (
            http.post(
                "/generate", json={"text": "Hello", "sampling_params": {"max_new_tokens": 3, "temperature": 0}}
            ).status_code
            == 200
        )
        tokens = http.post("/tokenize", json={"prompt": "Hello"}).json()["tokens"]
        assert http.post("/detokenize", json={"tokens": tokens}).json()["prompt"] == "Hello"
        assert (
            http.patch("/v1/runtime_config", json={"max_running_requests": 8, "stream_interval": 2}).status_code == 200
        )
        assert http.post("/v1/completions", json=completion).status_code == 200
        assert http.get("/v1/models").status_code == 200 and http.get("/v1/runtime_config").status_code == 200
        assert "serve_requests_finished_total" in http.get("/metrics").text
        info = http.get("/server_info").json()
        assert http.get("/health").status_code == 200
    processes = info["processes"]
    assert {name: p["role"] for name, p in processes.items()} == {
        "main": "http",
        "scheduler": "scheduler",
        "detokenizer": "detokenizer",
    }
    assert {name: p["role_check"] for name, p in processes.items()} == {
        "main": "enforce",
        "scheduler": "enforce",
        "detokenizer": "enforce",
    }
    assert len({p["config_hash"] for p in processes.values()}) == 1
    log = server.log()
    assert "RoleViolationError" not in log and "read namespace" not in log, log


def test_each_role_reads_fewer_namespaces_than_all() -> None:
    """The roles serve publishes list what each process reads, not everything."""
    everything = ROLE_READS["launcher"]
    for role in ("http", "scheduler", "detokenizer"):
        assert ROLE_READS[role] < everything, role
