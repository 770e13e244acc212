"""One C++ source -> one shared library, compiled once into a cache keyed by what it was built from."""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)


# Headers every build may include (`#include <native_build/...>`): what two packages' kernels share.
INCLUDE_DIR = Path(__file__).with_name("include")


class NativeBuildError(RuntimeError):
    """A shared library could not be built on this machine; the message says what to install or set."""


def cache_dir_of(package: str) -> Path:
    """Where `package`'s built libraries are kept: $XDG_CACHE_HOME/<package>, else ~/.cache/<package>."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / package


def _cpu_identity() -> str:
    """What -march=native compiles for: the CPU's feature flags (a shared cache may span machines)."""
    try:
        return next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    except OSError:
        return ""


def default_compiler(what: str) -> str:
    """$CXX, else g++ or c++ on PATH; `what` names the library that needs it, for the error."""
    compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        raise NativeBuildError(
            f"{what} needs a C++ compiler with OpenMP (g++), as torch.compile does on a CPU; none was "
            "found on PATH and $CXX is unset. Install g++ or set CXX."
        )
    return compiler


def _headers_text(directory: Path, *, nested: bool = True) -> str:
    """Every header's path and text under `directory` (in it alone unless `nested`), in a fixed
    order: a build's key changes with any of them."""
    headers = directory.rglob("*.h") if nested else directory.glob("*.h")
    return "\0".join(f"{h.relative_to(directory)}\0{h.read_text()}" for h in sorted(headers))


def build_library(
    source: Path, flags: tuple[str, ...], *, cache_dir: Path, compiler: str, what: str, include_dir: Path = INCLUDE_DIR
) -> Path:
    """The shared library built from `source` with `compiler` and `flags` (and the shared headers of
    `include_dir` on the include path), compiled into `cache_dir` unless a build of the same source,
    headers (the shared ones and those beside the source), compiler, flags and CPU is already there.

    The build lands atomically, so processes racing to build see no file or a whole one."""
    # The headers beside the source (`#include "..."`) are part of what it was built from, as the shared ones are.
    beside = _headers_text(source.parent, nested=False)
    key_text = "\0".join((source.read_text(), beside, _headers_text(include_dir), compiler, *flags, _cpu_identity()))
    key = hashlib.sha256(key_text.encode()).hexdigest()[:16]
    path = cache_dir / f"{source.stem}-{key}.so"
    if path.exists():
        return path
    logger.info("building %s into %s (once per machine)", what, path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise NativeBuildError(
            f"cannot create the cache {path.parent} for {what}: {error}; set XDG_CACHE_HOME to a writable directory"
        ) from error
    with tempfile.TemporaryDirectory(dir=path.parent) as scratch:
        built = Path(scratch) / path.name
        try:
            command = [compiler, *flags, "-I", str(include_dir), str(source), "-o", str(built)]
            result = subprocess.run(command, capture_output=True, text=True)
        except OSError as error:
            raise NativeBuildError(
                f"could not run the C++ compiler {compiler!r} to build {source.name}: {error}; "
                "install g++ or point CXX at a C++ compiler with OpenMP"
            ) from error
        if result.returncode != 0:
            raise NativeBuildError(
                f"compiling {source.name} with {compiler} failed (exit {result.returncode}):\n{result.stderr}"
            )
        os.replace(built, path)
    return path


def load_library(source: Path, flags: tuple[str, ...], *, package: str, what: str) -> ctypes.CDLL:
    """`source` built with the default compiler into `package`'s cache (unless already there), loaded."""
    return ctypes.CDLL(
        str(build_library(source, flags, cache_dir=cache_dir_of(package), compiler=default_compiler(what), what=what))
    )
