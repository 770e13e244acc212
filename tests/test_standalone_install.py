"""The packages another stack adopts drop into it: config-bags pip-installed alone into an empty
venv brings msgspec and nothing else, runtime-scheduler and spec-workers bring config-bags beside
it, and each package's own tests pass there, away from this workspace (its README beside them, whose
examples they may run)."""

from __future__ import annotations

import json
import shutil
import subprocess
import venv
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _installed(python: Path) -> set[str]:
    out = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {d["name"].lower().replace("_", "-") for d in json.loads(out)}


# (what is pip-installed, the distributions that then appear, whose tests run)
ALONE = [
    (("packages/config-bags",), {"config-bags", "msgspec"}, "packages/config-bags/tests"),
    (
        ("packages/config-bags", "packages/runtime-scheduler"),
        {"config-bags", "msgspec", "runtime-scheduler"},
        "packages/runtime-scheduler/tests",
    ),
    (
        ("packages/config-bags", "packages/spec-workers"),
        {"config-bags", "msgspec", "spec-workers"},
        "packages/spec-workers/tests",
    ),
]


@pytest.mark.parametrize(("installs", "brings", "tests"), ALONE, ids=[case[2].split("/")[1] for case in ALONE])
def test_package_installs_alone_and_passes_its_tests(
    tmp_path: Path, installs: tuple[str, ...], brings: set[str], tests: str
) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    empty = _installed(python)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, *(str(ROOT / path) for path in installs)], check=True, capture_output=True)
    assert _installed(python) - empty == brings

    subprocess.run([*pip, "pytest", "hypothesis"], check=True, capture_output=True)
    copied = tmp_path / "tests"
    shutil.copytree(ROOT / tests, copied, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy((ROOT / tests).parent / "README.md", tmp_path / "README.md")
    done = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(copied)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout
