"""mypy --strict over every package of the workspace: a misspelled leaf is a type error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(str(p.relative_to(ROOT)) for p in [*ROOT.glob("packages/*/src"), ROOT / "tools/census/src"])


def test_every_package_type_checks() -> None:
    done = subprocess.run([sys.executable, "-m", "mypy", *SOURCES], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]


@pytest.mark.parametrize("read", ["get_schedule()", "bag(ScheduleBag)"])
def test_a_misspelled_leaf_is_a_type_error(tmp_path: Path, read: str) -> None:
    """The point of typed bags: `get_schedule().page_sise`, or `bag(ScheduleBag).page_sise` (a
    bag asked for by its type), never reaches run time.

    Reverse-verified: spelling it `page_size` makes mypy pass and this test fail; so does
    `bag()` annotated to return `Any`."""
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from config_bags import bag\nfrom config_bags.server import ScheduleBag, get_schedule\n\n"
        f"size: int = {read}.page_sise\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", str(probe)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 1
    assert '"ScheduleBag" has no attribute "page_sise"' in done.stdout
