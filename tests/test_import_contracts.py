"""The import graph is the guarantee: lint-imports keeps the contracts of the root pyproject, and
breaks them when a package imports what it must not (shown on a copy of the tree)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {
    "config_bags": ROOT / "packages/config-bags/src/config_bags",
    "native_build": ROOT / "packages/native-build/src/native_build",
    "runtime_scheduler": ROOT / "packages/runtime-scheduler/src/runtime_scheduler",
    "runtime_runner": ROOT / "packages/runtime-runner/src/runtime_runner",
    "attn_backends": ROOT / "packages/attn-backends/src/attn_backends",
    "spec_workers": ROOT / "packages/spec-workers/src/spec_workers",
    "serve": ROOT / "packages/serve/src/serve",
    "serve_testing": ROOT / "packages/serve-testing/src/serve_testing",
    "census": ROOT / "tools/census/src/census",
}
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(config: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(config), "--no-cache"],
        capture_output=True,
        text=True,
        env=env,
        cwd=config.parent,
    )


def test_the_tree_keeps_every_contract() -> None:
    done = _lint(ROOT / "pyproject.toml")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Contracts: 10 kept, 0 broken." in done.stdout


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    """A copy of every package's sources and of the root pyproject, importable ahead of the venv."""
    src = tmp_path / "src"
    for name, path in PACKAGES.items():
        shutil.copytree(path, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


@pytest.mark.parametrize(
    ("module", "statement", "broken"),
    [
        (
            "runtime_scheduler/forbidden.py",
            "import runtime_runner\n",
            "runtime packages are independent of each other BROKEN",
        ),
        (
            "attn_backends/forbidden.py",
            "from spec_workers import __name__ as _n\n",
            "runtime packages are independent of each other BROKEN",
        ),
        ("runtime_runner/forbidden.py", "import serve\n", "runtime packages never import the composition root BROKEN"),
        (
            "config_bags/forbidden.py",
            "import torch\n",
            "config_bags stands alone: no other package of this repo, no torch BROKEN",
        ),
        (
            "config_bags/forbidden.py",
            "import runtime_scheduler\n",
            "config_bags stands alone: no other package of this repo, no torch BROKEN",
        ),
        (
            "config_bags/forbidden.py",
            "import config_bags.server.root\n",
            "config_bags' mechanism never imports this server's bags (config_bags.server) BROKEN",
        ),
        (
            "config_bags/__init__.py",
            "from config_bags.server.accessors import get_schedule\n",
            "config_bags' package face exports the mechanism alone BROKEN",
        ),
        # constraints -> publish -> root -> bag -> leaf_types -> constraints
        ("config_bags/constraints.py", "import config_bags.publish\n", "config_bags has no import cycle BROKEN"),
        # a kernel reaching up to a backend, and a backend up to the choice that builds it
        ("attn_backends/kernels/decode_plan.py", "import attn_backends.backends.cpu_paged\n", "attn_backends in rooms"),
        ("attn_backends/backends/wrapper.py", "import attn_backends.choice.registry\n", "attn_backends in rooms"),
        # the cycle this contract ended: the text events reaching up to the call readers
        ("serve/assistant/markers.py", "import serve.tool_calls.families\n", "serve reads a turn in layers"),
        ("serve/forbidden.py", "import serve_testing.server\n", "the product never imports the test kit"),
        ("native_build/forbidden.py", "import torch\n", "native_build stands alone: the standard library only BROKEN"),
        (
            "native_build/forbidden.py",
            "import config_bags\n",
            "native_build stands alone: the standard library only BROKEN",
        ),
    ],
)
def test_a_forbidden_import_breaks_a_contract(tree_copy: Path, module: str, statement: str, broken: str) -> None:
    """Reverse-verification of the contracts themselves: each forbidden edge turns lint-imports red."""
    (tree_copy / "src" / module).write_text(statement)
    done = _lint(tree_copy / "pyproject.toml", tree_copy / "src")
    assert done.returncode != 0
    assert broken in done.stdout, done.stdout


def test_the_copy_without_a_forbidden_import_is_clean(tree_copy: Path) -> None:
    """The copy itself is not what breaks the contracts above."""
    done = _lint(tree_copy / "pyproject.toml", tree_copy / "src")
    assert done.returncode == 0, done.stdout + done.stderr
