"""End to end: one tensor-parallel group across two nodes, both on this machine. Node 0 is `serve`
as an operator runs it on the first machine (HTTP, tokenizer, detokenizer, rank 0); node 1 is the
same command with --node-rank 1, whose launcher starts rank 1 alone. The ranks meet at
--dist-init-addr and talk only over torch.distributed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx
import pytest

from serve_testing.server import ServerProcess, free_port, process_alive
from serve_testing.tiny_checkpoint import build_tiny_checkpoint

pytestmark = pytest.mark.timeout(600)


def test_two_nodes_serve_one_group_and_node_1_ends_with_node_0(tmp_path: Path) -> None:
    """Node 1's rank serves node 0's configuration (one config hash everywhere); greedy tokens are
    transformers' (a one-process server's); when node 0 stops, node 1's rank loses its group and
    node 1's launcher ends with it.

    Reverse-verified: with the remote rank keeping its own bags (node_rank = 1), the server's
    processes reported two config hashes."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model_dir = build_tiny_checkpoint(tmp_path / "tiny-llama")
    flags = (
        "--tp-size",
        "2",
        "--nnodes",
        "2",
        "--dist-init-addr",
        f"127.0.0.1:{free_port()}",
        "--max-total-tokens",
        "8192",
        "--device",
        "cpu",
        "--dtype",
        "float32",
        "--cpu-threads",
        "1",
    )
    node0 = ServerProcess(model_dir, *flags, "--node-rank", "0")
    log = Path(tempfile.mkstemp(prefix="serve-node1-", suffix=".log")[1])
    with open(log, "wb") as out:
        node1 = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "serve.main",
                "--model-path",
                str(model_dir),
                "--port",
                str(node0.port),
                *flags,
                "--node-rank",
                "1",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
        )
    try:
        node0.wait_ready()
        with httpx.Client(base_url=node0.base_url, timeout=120) as http:
            info = http.get("/server_info").json()
            assert {p["config_hash"] for p in info["processes"].values()} == {info["config"]["config_hash"]}, info[
                "processes"
            ]
            assert set(info["processes"]) == {"main", "detokenizer", "scheduler.dp0.tp0", "scheduler.dp0.tp1"}
            tokenizer = AutoTokenizer.from_pretrained(model_dir)
            model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
            prompt_ids = tokenizer.encode("The quick brown fox")
            reference = model.generate(
                torch.tensor([prompt_ids]), max_new_tokens=10, do_sample=False, eos_token_id=None
            )[0, len(prompt_ids) :]
            body = {
                "input_ids": prompt_ids,
                "sampling_params": {"max_new_tokens": 10, "temperature": 0, "ignore_eos": True},
            }
            assert http.post("/generate", json=body).json()["output_ids"] == reference.tolist()
        remote_rank = info["pids"]["scheduler.dp0.tp1"]
        assert node0.stop() == 0
        assert node1.wait(60) == 1, log.read_text()
        assert "node 1 of 2: running scheduler.dp0.tp1; node 0 serves HTTP" in log.read_text()
        assert not process_alive(remote_rank)
    finally:
        node0.stop()
        if node1.poll() is None:
            os.killpg(node1.pid, signal.SIGKILL)
            node1.wait()
