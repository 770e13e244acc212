"""llama.cpp's `llama-server` as the CPU peer of tools/bench_peer.py: built once per machine, a bf16
GGUF of the bundled model beside it, and the server launched and stopped as a subprocess.

    uv run python tools/llama_cpp_peer.py      # build and convert what is missing, then check both files

The source is the llama.cpp tree vendored in the `llama-cpp-python` sdist from PyPI (a pinned
version, `LLAMA_CPP_PYTHON_VERSION`); only the `llama-server` and `llama-quantize` targets are
built, statically linked so that the binaries alone are kept, with the converter's Python files.
It also quantizes a bf16 GGUF with llama-quantize (`ensure_quantized_gguf`) and converts a Hugging
Face checkpoint with llama.cpp's converter (`convert_checkpoint`), as llama.cpp's users make their
files. Everything lives under $XDG_CACHE_HOME/serve-bench (else ~/.cache/serve-bench):

    llama-cpp-python-<version>/bin/llama-server    the binary, built for this CPU (GGML_NATIVE)
    llama-cpp-python-<version>/bin/llama-quantize  its quantizer, from the same build
    llama-cpp-python-<version>/convert/            convert_hf_to_gguf.py and its own gguf-py
    llama-cpp-python-<version>/build.json          version, llama.cpp commit, cmake flags, build time
    llama-cpp-python-<version>/build.log           what cmake printed
    gguf/<name>.bf16-<sha of the source>.gguf      the bf16 GGUF made from a quantized one
    gguf/<name>.bf16-<sha>.<KIND>.gguf             llama-quantize's file of that bf16 GGUF
    converter-packages/                            sentencepiece, which the converter imports

A build or conversion is written in a scratch directory and renamed into place when complete, under
a lock, so an interrupted or concurrent run never leaves (or uses) half of one. Nothing of llama.cpp
is part of this repository, and no test depends on it.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

# Pinned rather than "newest", so that figures name the code that produced them; bump it to move on.
LLAMA_CPP_PYTHON_VERSION = "0.3.36"

# What the peer is built with. GGML_NATIVE tunes it to this CPU (AVX2/FMA here), as anyone building
# llama.cpp on their own machine gets. The UI flags keep the build offline (by default it fetches its
# web UI), OpenSSL is not needed on localhost, and static libraries leave one self-contained binary.
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=ON",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_SERVER=ON",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
)


def cache_root() -> Path:
    """$XDG_CACHE_HOME/serve-bench, else ~/.cache/serve-bench."""
    base = os.environ.get("XDG_CACHE_HOME")
    return (Path(base) if base else Path.home() / ".cache") / "serve-bench"


@contextmanager
def _locked(name: str) -> Iterator[None]:
    """Hold an exclusive lock file in the cache: two runs building the same thing take turns."""
    cache_root().mkdir(parents=True, exist_ok=True)
    with open(cache_root() / f".{name}.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --- the build --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PeerBuild:
    """A built llama-server and what it was built from."""

    binary: Path
    llama_cpp_python: str
    llama_cpp_commit: str
    cmake_flags: tuple[str, ...]
    build_seconds: float
    built_at: str

    @property
    def quantizer(self) -> Path:
        """llama-quantize from the same build."""
        return self.binary.parent / "llama-quantize"

    @property
    def converter(self) -> Path:
        """llama.cpp's convert_hf_to_gguf.py from the same source (it imports its own gguf-py)."""
        return self.binary.parent.parent / "convert" / "convert_hf_to_gguf.py"

    def describe(self) -> str:
        """One line for a report: which llama.cpp this is."""
        return (
            f"llama.cpp {self.llama_cpp_commit} (vendored in llama-cpp-python {self.llama_cpp_python}), "
            f"llama-server built here with {' '.join(self.cmake_flags)}"
        )


# llama-server is the peer; llama-quantize writes the K-quant files people download.
BUILT_TARGETS = ("llama-server", "llama-quantize")


def peer_dir(version: str = LLAMA_CPP_PYTHON_VERSION) -> Path:
    """Where the build of llama-cpp-python `version` lives."""
    return cache_root() / f"llama-cpp-python-{version}"


def load_build(version: str = LLAMA_CPP_PYTHON_VERSION) -> PeerBuild | None:
    """The cached build of `version`, or None when there is none (or it is incomplete)."""
    record = peer_dir(version) / "build.json"
    if not record.is_file():
        return None
    fields = json.loads(record.read_text(encoding="utf-8"))
    build = PeerBuild(
        **{**fields, "binary": peer_dir(version) / fields["binary"], "cmake_flags": tuple(fields["cmake_flags"])}
    )
    # A build from before llama-quantize was kept has no second binary: build again.
    complete = all(os.access(build.binary.parent / target, os.X_OK) for target in BUILT_TARGETS)
    return build if complete else None


def ensure_llama_server(version: str = LLAMA_CPP_PYTHON_VERSION, jobs: int | None = None) -> PeerBuild:
    """The cached llama-server build of `version`, building it first when missing (minutes)."""
    found = load_build(version)
    if found is not None:
        return found
    with _locked(f"build-{version}"):
        found = load_build(version)  # another run may have finished it while this one waited
        if found is not None:
            return found
        return _build(version, jobs or os.cpu_count() or 1)


def _build(version: str, jobs: int) -> PeerBuild:
    """Download, configure and build llama-server in a scratch directory, then move the binary and
    its record into place."""
    scratch = Path(tempfile.mkdtemp(prefix=f".build-{version}-", dir=cache_root()))
    try:
        source = _unpack(_download_sdist(version, scratch / "download"), scratch / "src")
        llama_dir = source / "vendor" / "llama.cpp"
        commit = vendored_commit(source, version)
        out = scratch / "out"
        (out / "bin").mkdir(parents=True)
        log = out / "build.log"
        print(
            f"llama_cpp_peer: building llama-server from llama-cpp-python {version} (llama.cpp {commit}) "
            f"with {jobs} jobs (10 minutes or more on 2 cores); log: {log}",
            flush=True,
        )
        started = time.monotonic()
        # LLAMA_BUILD_COMMIT names the vendored commit: the sdist has no .git for cmake to ask.
        _run_logged(
            [
                "cmake",
                "-S",
                str(llama_dir),
                "-B",
                str(llama_dir / "build"),
                *CMAKE_FLAGS,
                f"-DLLAMA_BUILD_COMMIT={commit}",
            ],
            log,
        )
        _run_logged(
            ["cmake", "--build", str(llama_dir / "build"), "--target", *BUILT_TARGETS, "-j", str(jobs)],
            log,
        )
        seconds = time.monotonic() - started
        for target in BUILT_TARGETS:
            shutil.copy2(llama_dir / "build" / "bin" / target, out / "bin" / target)
        copy_converter(llama_dir, out / "convert")
        record = PeerBuild(
            binary=Path("bin/llama-server"),
            llama_cpp_python=version,
            llama_cpp_commit=commit,
            cmake_flags=CMAKE_FLAGS,
            build_seconds=round(seconds, 1),
            built_at=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        )
        (out / "build.json").write_text(
            json.dumps({**asdict(record), "binary": str(record.binary)}, indent=2) + "\n", encoding="utf-8"
        )
        out.rename(peer_dir(version))
        print(
            f"llama_cpp_peer: built in {seconds / 60:.1f} min: {peer_dir(version) / 'bin' / 'llama-server'}", flush=True
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    built = load_build(version)
    if built is None:
        raise RuntimeError(f"the build of llama-server left no usable binary in {peer_dir(version)}")
    return built


def copy_converter(llama_dir: Path, target: Path) -> None:
    """Keep the converter with the binaries: convert_hf_to_gguf.py, its `conversion` package and its
    own gguf-py are what llama.cpp's users turn a safetensors checkpoint into a GGUF with."""
    target.mkdir()
    shutil.copy2(llama_dir / "convert_hf_to_gguf.py", target / "convert_hf_to_gguf.py")
    for package in ("conversion", "gguf-py"):
        shutil.copytree(llama_dir / package, target / package)


def _pip() -> list[str]:
    """A pip to download with: the venv's own when it has one, else pip run by uv (this project's
    venv has no pip; `uv run` exports $UV, the uv binary that started it)."""
    import importlib.util

    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    uv = os.environ.get("UV") or shutil.which("uv")
    if uv is None:
        raise RuntimeError("no pip to download llama-cpp-python's sdist with: install pip or uv")
    return [uv, "tool", "run", "pip"]


def _download_sdist(version: str, folder: Path) -> Path:
    """llama-cpp-python's source distribution from PyPI (it vendors llama.cpp's whole tree)."""
    folder.mkdir(parents=True)
    print(
        f"llama_cpp_peer: downloading the llama-cpp-python {version} sdist from PyPI (pip prepares its metadata: a "
        "minute or two)",
        flush=True,
    )
    subprocess.run(
        [*_pip(), "download", "--no-deps", "--no-binary", ":all:", f"llama-cpp-python=={version}", "-d", str(folder)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    archives = sorted(folder.glob("llama_cpp_python-*.tar.gz"))
    if len(archives) != 1:
        raise RuntimeError(f"expected one llama-cpp-python sdist in {folder}, found {[a.name for a in archives]}")
    return archives[0]


def _unpack(archive: Path, folder: Path) -> Path:
    """Unpack `archive` into `folder` and return its top directory."""
    with tarfile.open(archive) as tar:
        tar.extractall(folder, filter="data")  # "data": no absolute paths, links out or devices
    (top,) = folder.iterdir()
    return top


def vendored_commit(source: Path, version: str) -> str:
    """The llama.cpp commit llama-cpp-python `version` vendors, from its changelog's entry for that
    version ("update llama.cpp to ggml-org/llama.cpp@<hash>"); "unknown" when it names none."""
    section = re.search(
        rf"^## \[{re.escape(version)}\]\n(.*?)(?=^## \[)",
        (source / "CHANGELOG.md").read_text(encoding="utf-8"),
        re.MULTILINE | re.DOTALL,
    )
    found = re.search(r"llama\.cpp@([0-9a-f]{7,40})", section.group(1)) if section else None
    return found.group(1) if found else "unknown"


def _run_logged(command: list[str], log: Path, env: dict[str, str] | None = None) -> None:
    """Run `command` appending its output to `log`; on failure raise with the log's tail."""
    with open(log, "ab") as out:
        out.write(f"$ {' '.join(command)}\n".encode())
        out.flush()
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=False, env=env)
    if done.returncode != 0:
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-40:])
        raise RuntimeError(f"{command[0]} failed with code {done.returncode}:\n{tail}")


def server_version(binary: Path) -> str:
    """What `llama-server --version` says (its version and commit lines)."""
    done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60, check=False)
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith(("version", "built with"))]
    return "; ".join(lines) or "unknown"


# --- the bf16 GGUF ----------------------------------------------------------------------------


def bf16_gguf_path(source: Path) -> Path:
    """Where the bf16 GGUF made from `source` is cached: keyed by the source's content, so a
    different file of the same name gets its own."""
    digest = hashlib.sha256()
    with open(source, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    stem = source.name.removesuffix(".gguf").split(".")[0]
    return cache_root() / "gguf" / f"{stem}.bf16-{digest.hexdigest()[:12]}.gguf"


def ensure_bf16_gguf(source: Path) -> Path:
    """The bf16 GGUF of `source`'s weights, written on first use (seconds)."""
    target = bf16_gguf_path(source)
    if target.is_file():
        return target
    with _locked("gguf"):
        if not target.is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            scratch = target.with_name(f".{target.name}.{os.getpid()}")
            try:
                write_bf16_gguf(source, scratch)
                scratch.rename(target)
            finally:
                scratch.unlink(missing_ok=True)
    return target


def write_bf16_gguf(source: Path, target: Path) -> None:
    """Write `source` to `target` with every weight matrix de-quantized and stored as BF16.

    These are the very weights our server serves: it de-quantizes the same file to fp32 through
    transformers and rounds to bf16, and gguf's BF16 rounds to nearest even as torch does. 1-D
    tensors (the norms) are F32 in the source and stay so, as llama.cpp's own converter keeps them.
    Every metadata field is copied, but general.file_type says MOSTLY_BF16."""
    import gguf
    import numpy as np

    reader = gguf.GGUFReader(source)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(target, arch=arch)  # it writes general.architecture itself
    for key, field in reader.fields.items():
        if key.startswith("GGUF.") or key in ("general.architecture", "general.file_type"):
            continue  # the header's own counts, and the two the writer is told separately
        sub_type = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), field.types[0], sub_type=sub_type)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    for tensor in reader.tensors:
        # The reader's arrays are row-major (numpy order), as the writer expects them.
        weights = np.asarray(gguf.quants.dequantize(tensor.data, tensor.tensor_type), dtype=np.float32)
        if weights.ndim == 1:
            writer.add_tensor(tensor.name, weights)
        else:
            writer.add_tensor(
                tensor.name,
                gguf.quants.quantize(weights, gguf.GGMLQuantizationType.BF16),
                raw_dtype=gguf.GGMLQuantizationType.BF16,
            )
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


# --- running it -------------------------------------------------------------------------------


# --- files written by llama.cpp's own tools ---------------------------------------------------


def quantized_gguf_path(source: Path, kind: str) -> Path:
    """Where `source` quantized to `kind` is cached: beside it, named for both."""
    return source.with_name(f"{source.name.removesuffix('.gguf')}.{kind}.gguf")


def ensure_quantized_gguf(source: Path, kind: str, threads: int | None = None) -> Path:
    """`source` (a bf16 GGUF) as llama-quantize writes it for `kind` (its name for a type or mix:
    Q4_K_M, Q5_K_M, Q6_K, Q8_0, Q4_0, ...), written beside it on first use (seconds to a minute)."""
    target = quantized_gguf_path(source, kind)
    if target.is_file():
        return target
    build = ensure_llama_server()
    with _locked("gguf"):
        if not target.is_file():
            scratch = target.with_name(f".{target.name}.{os.getpid()}")
            log = target.with_name(f"{target.name}.log")
            try:
                _run_logged(
                    [str(build.quantizer), str(source), str(scratch), kind, str(threads or os.cpu_count() or 1)], log
                )
                scratch.rename(target)
            finally:
                scratch.unlink(missing_ok=True)
    return target


def convert_checkpoint(checkpoint: Path, target: Path) -> None:
    """Write the Hugging Face checkpoint `checkpoint` as a bf16 GGUF at `target` with llama.cpp's own
    converter, as its users make one (a minute for a 1B model)."""
    build = ensure_llama_server()
    scratch = target.with_name(f".{target.name}.{os.getpid()}")
    log = target.with_name(f"{target.name}.log")
    try:
        _run_logged(
            [sys.executable, str(build.converter), str(checkpoint), "--outtype", "bf16", "--outfile", str(scratch)],
            log,
            env={**os.environ, "PYTHONPATH": str(_converter_packages(log))},
        )
        scratch.rename(target)
    finally:
        scratch.unlink(missing_ok=True)


def _converter_packages(log: Path) -> Path:
    """A folder of what the converter imports beyond this venv (sentencepiece, which it imports for
    every Llama even when the tokenizer is a tokenizer.json), installed there on first use."""
    folder = cache_root() / "converter-packages"
    if not (folder / "sentencepiece").is_dir():
        uv = os.environ.get("UV") or shutil.which("uv")
        if uv is None:
            raise RuntimeError("no uv to install the converter's sentencepiece with")
        _run_logged([uv, "pip", "install", "--python", sys.executable, "--target", str(folder), "sentencepiece"], log)
    return folder


def free_port() -> int:
    """A TCP port nothing listens on right now."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop_group(process: subprocess.Popen[bytes], first: signal.Signals, timeout_s: float) -> None:
    """Stop `process`, started with start_new_session=True, and everything in its process group:
    send `first` to the group, wait up to `timeout_s` for the leader to exit, SIGKILL whatever of
    the group is left, then reap the leader. The leader is waited for without being reaped
    (WNOWAIT), so that the group id cannot have been handed to another process when it is killed."""
    if process.poll() is not None:
        return
    os.killpg(process.pid, first)
    deadline = time.monotonic() + timeout_s
    while (
        time.monotonic() < deadline and os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    ):
        time.sleep(0.1)
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the group is gone already (a zombie leader still counts, so this is rare)
    process.wait()


class LlamaServer:
    """llama-server on `model` in its own session (so that it and anything it starts can be killed
    as one group), logging to a temporary file. Use as a context manager, or call stop()."""

    def __init__(
        self,
        binary: Path,
        model: Path,
        threads: int,
        parallel: int = 32,
        context: int = 32768,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.log_path = Path(tempfile.mkstemp(prefix="llama-server-", suffix=".log")[1])
        # --kv-unified: the 32 slots share one KV buffer of `context` cells, so each request may use
        # what the others leave (as our server's page pool does) rather than a 1/32 slice of it.
        self.command = [
            str(binary),
            "-m",
            str(model),
            "-t",
            str(threads),
            "-tb",
            str(threads),
            "--parallel",
            str(parallel),
            "-c",
            str(context),
            "--cont-batching",
            "--kv-unified",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            *extra,
        ]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def log(self) -> str:
        """Everything llama-server printed so far."""
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout_s: float = 120.0) -> None:
        """Wait until /health answers 200 (it answers 503 while the model loads); raise with the log
        when the server exits or the time runs out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama-server exited with code {self.process.returncode}:\n{self.log()[-4000:]}")
            try:
                with urllib.request.urlopen(self.base_url + "/health", timeout=5) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass  # not listening yet, or 503 while loading
            time.sleep(0.2)
        self.stop()
        raise TimeoutError(f"llama-server was not ready within {timeout_s:.0f} s:\n{self.log()[-4000:]}")

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM its process group; SIGKILL what is left of it after `timeout_s`."""
        stop_group(self.process, signal.SIGTERM, timeout_s)

    def __enter__(self) -> LlamaServer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()


NO_REPACK = "--no-repack"


def started_server(binary: Path, model: Path, threads: int) -> LlamaServer:
    """A ready llama-server on `model`. Where it crashes with SIGSEGV while loading, as llama.cpp
    0c1e57098's weight repacking does for the Q4_1 file on an AMX Xeon, it is started once more
    with --no-repack (the plain ggml kernels); its `command` then shows the flag, and
    tools/bench_peer.py prints it beside the figures."""
    server = LlamaServer(binary, model, threads)
    try:
        server.wait_ready()
        return server
    except RuntimeError:
        server.stop()
        if server.process.returncode != -signal.SIGSEGV:
            raise
    retry = LlamaServer(binary, model, threads, extra=(NO_REPACK,))
    try:
        retry.wait_ready()
    except BaseException:
        retry.stop()
        raise
    return retry


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST `body` as JSON and return the JSON answer."""
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as response:
        answer: dict[str, Any] = json.loads(response.read())
    return answer


CHAT_QUESTION = "What is the capital of France?"


def check_server(base_url: str) -> dict[str, Any]:
    """What the benchmark relies on, asked of a running llama-server: a greedy chat answer (is the
    model sensible?), a prompt given as token ids (the same tokens as text give the same greedy
    output), and ignore_eos (an answer that stops early runs to max_tokens with it). Raises when
    one does not hold; returns what it saw."""
    chat = _post(
        base_url + "/v1/chat/completions",
        {"messages": [{"role": "user", "content": CHAT_QUESTION}], "temperature": 0.0, "max_tokens": 48},
    )
    text = f"<|im_start|>user\n{CHAT_QUESTION}<|im_end|>\n<|im_start|>assistant\n"
    ids = _post(base_url + "/tokenize", {"content": text, "add_special": False, "parse_special": True})["tokens"]
    as_text = _post(base_url + "/v1/completions", {"prompt": text, "max_tokens": 200, "temperature": 0.0})
    as_ids = _post(base_url + "/v1/completions", {"prompt": ids, "max_tokens": 200, "temperature": 0.0})
    forced = _post(
        base_url + "/v1/completions", {"prompt": ids, "max_tokens": 200, "temperature": 0.0, "ignore_eos": True}
    )
    seen = {
        "chat": chat["choices"][0]["message"]["content"],
        "prompt_tokens": as_ids["usage"]["prompt_tokens"],
        "stops_after": as_ids["usage"]["completion_tokens"],
        "finish_reason": as_ids["choices"][0]["finish_reason"],
        "ignore_eos_tokens": forced["usage"]["completion_tokens"],
    }
    if as_ids["usage"]["prompt_tokens"] != len(ids) or as_ids["choices"][0]["text"] != as_text["choices"][0]["text"]:
        raise RuntimeError(f"a prompt of token ids was not read as those tokens: {seen}")
    if as_ids["choices"][0]["finish_reason"] != "stop" or forced["usage"]["completion_tokens"] != 200:
        raise RuntimeError(f"ignore_eos was not honoured (or the answer never stopped by itself): {seen}")
    return seen


def main() -> None:
    """Build and convert what is missing, then launch llama-server on each file and check it."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--version", default=LLAMA_CPP_PYTHON_VERSION, help="llama-cpp-python version whose vendored llama.cpp to build"
    )
    args = p.parse_args()
    from runtime_runner.loading.default_model import bundled_gguf

    build = ensure_llama_server(args.version)
    print(build.describe())
    print(
        f"binary: {build.binary} ({server_version(build.binary)}), built in {build.build_seconds / 60:.1f} min on "
        f"{build.built_at}"
    )
    q4 = bundled_gguf()
    for model in (ensure_bf16_gguf(q4), q4):
        with started_server(build.binary, model, threads=os.cpu_count() or 1) as server:
            seen = check_server(server.base_url)
        flags = (
            " (run with --no-repack: it crashed loading with its weight repacking)"
            if NO_REPACK in server.command
            else ""
        )
        print(f"{model.name}{flags}: {json.dumps(seen)}")


if __name__ == "__main__":
    main()
