"""One formatter, one linter: the tree is as `ruff format` writes it and `ruff check` finds nothing
(the root pyproject's [tool.ruff]: line length 120; pycodestyle, pyflakes, import order, bugbear,
pyupgrade). Run `uv run ruff format . && uv run ruff check --fix .` to mend a failure.

Reverse-verified: an unused import added to serve/main.py fails the check, and a line joined past
120 characters fails the format check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command", [["format", "--check"], ["check"]], ids=["format", "check"])
def test_ruff_is_clean(command: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "ruff", *command, "."], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
