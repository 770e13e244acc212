"""End to end: when the scheduler process dies, requests in flight get a 5xx, /health turns
unhealthy, and the launcher takes everything down with no orphan process."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest

from serve_testing.server import ServerProcess, process_alive
from serve_testing.tiny_checkpoint import build_tiny_checkpoint

pytestmark = pytest.mark.timeout(300)


def test_killed_scheduler_fails_requests_and_shuts_down(tmp_path: Path) -> None:
    """Reverse-verified: without the launcher's watch on the children, the in-flight request hung
    until the client timeout and the server kept answering /health with 200. The exit bound too:
    waiting for the tokenizer worker's teardown and Python's own (torch unloading) took the server
    5.3-7.8 s to exit, and the test failed on it."""
    server = ServerProcess(
        build_tiny_checkpoint(tmp_path / "tiny-llama"),
        "--max-total-tokens",
        "65536",
        "--device",
        "cpu",
        "--dtype",
        "float32",
    )
    try:
        server.wait_ready()
        with httpx.Client(base_url=server.base_url, timeout=60) as http:
            pids = http.get("/server_info").json()["pids"]
            answers: list[httpx.Response] = []
            body = {"prompt": "Hello", "max_tokens": 3000, "temperature": 0, "ignore_eos": True}
            waiting = threading.Thread(target=lambda: answers.append(http.post("/v1/completions", json=body)))
            waiting.start()
            deadline = time.monotonic() + 20
            while "serve_num_running_requests 1" not in http.get("/metrics").text and time.monotonic() < deadline:
                time.sleep(0.1)
            os.kill(pids["scheduler"], signal.SIGKILL)
            killed = time.monotonic()
            waiting.join(30)
            assert answers and answers[0].status_code == 503, answers
            assert "scheduler process died" in answers[0].json()["error"]["message"]
            health = http.get("/health")
            assert health.status_code == 503 and "scheduler" in health.json()["reason"]
        assert server.process.wait(30) == 1
        # The grace while /health answers 503 is launcher.FAULT_GRACE_S (2 s); the rest is the stop.
        exited_after_s = time.monotonic() - killed
        assert exited_after_s < 5.0, f"the server took {exited_after_s:.1f} s to exit after its scheduler died"
        assert "the scheduler process died" in server.log()
        for role in ("scheduler", "detokenizer", "main"):
            assert not process_alive(pids[role]), f"{role} process {pids[role]} outlived the launcher"
    finally:
        server.stop()
