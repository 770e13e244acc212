"""Each shared header the kernels include compiles on its own: it includes what it uses, and its
ISA-specific parts are guarded, so that it compiles for this CPU and for a plain x86-64 target alike."""

from __future__ import annotations

import platform
import subprocess
from pathlib import Path

import pytest

from native_build import default_compiler
from native_build.library import INCLUDE_DIR

HEADERS = sorted(h.relative_to(INCLUDE_DIR).as_posix() for h in INCLUDE_DIR.rglob("*.h"))
# The host's own ISA (what the kernels build for), and x86-64 with no vector extension past SSE2,
# where a header's AVX parts must drop out rather than fail.
TARGETS = ["native", *(["x86-64"] if platform.machine() == "x86_64" else [])]


@pytest.mark.parametrize("march", TARGETS)
@pytest.mark.parametrize("header", HEADERS)
def test_header_compiles_alone(header: str, march: str, tmp_path: Path) -> None:
    """Reverse-verified by hand: avx2_store_row.h without its AVX2 guard fails for x86-64."""
    source = tmp_path / "alone.cpp"
    source.write_text(f"#include <{header}>\n")
    # Compiled to code, every function kept: an unguarded intrinsic fails only when its caller is
    # compiled for a target without it, and an unused inline function is otherwise never compiled.
    command = [
        default_compiler("the header check"),
        "-std=c++17",
        f"-march={march}",
        "-fkeep-inline-functions",
        "-fkeep-static-functions",
        "-c",
        "-I",
        str(INCLUDE_DIR),
        str(source),
        "-o",
        str(tmp_path / "alone.o"),
    ]
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
