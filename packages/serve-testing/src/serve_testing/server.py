"""The real server started as a subprocess on a free port, for end-to-end tests and benchmarks."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def process_alive(pid: int) -> bool:
    """Whether process `pid` still runs: it exists and is not a zombie waiting to be reaped."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"


class ServerProcess:
    """`serve` running in a subprocess (its own session, so its children can be found and checked)."""

    def __init__(self, model_dir: Path | None, *flags: str, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(tempfile.mkstemp(prefix="serve-", suffix=".log")[1])
        model = [] if model_dir is None else ["--model-path", str(model_dir)]  # None: the default model
        command = [sys.executable, "-m", "serve.main", *model, "--port", str(self.port), *flags]
        environment = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", **(env or {})}
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, env=environment, start_new_session=True
            )

    def log(self) -> str:
        """Everything the server printed so far."""
        return self.log_path.read_text(errors="replace")

    def health(self) -> int | None:
        """The status code of GET /health, or None when nothing answers."""
        try:
            with urllib.request.urlopen(self.base_url + "/health", timeout=5) as response:
                return int(response.status)
        except urllib.error.HTTPError as err:
            return int(err.code)
        except OSError:
            return None

    def wait_ready(self, timeout_s: float = 180.0) -> None:
        """Wait until /health answers 200; raise with the server's log if it exits or times out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"serve exited with code {self.process.returncode} before it was ready:\n{self.log()}"
                )
            if self.health() == 200:
                return
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"serve was not ready within {timeout_s:.0f} s:\n{self.log()}")

    def wait_announced(self, timeout_s: float = 180.0) -> None:
        """Wait until the server prints its "ready at" line; raise with its log if it exits or times out."""
        deadline = time.monotonic() + timeout_s
        while "serve: ready at" not in self.log():
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"serve exited with code {self.process.returncode} before it was ready:\n{self.log()}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"serve did not announce itself ready within {timeout_s:.0f} s:\n{self.log()}")
            time.sleep(0.05)

    def stop(self, timeout_s: float = 30.0) -> int:
        """Stop the server as an operator would (SIGINT) and return its exit code; kill its whole
        session if it does not stop in time."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        return int(self.process.returncode)
