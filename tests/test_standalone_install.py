"""config-bags drops into any stack: pip-installed alone into an empty venv it brings msgspec and
nothing else, and its own tests pass there, away from this workspace (the README beside them,
whose examples they run)."""

from __future__ import annotations

import json
import shutil
import subprocess
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _installed(python: Path) -> set[str]:
    out = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {d["name"].lower().replace("_", "-") for d in json.loads(out)}


def test_config_bags_installs_alone_and_passes_its_tests(tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    empty = _installed(python)
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    subprocess.run([*pip, str(ROOT / "packages/config-bags")], check=True, capture_output=True)
    assert _installed(python) - empty == {"config-bags", "msgspec"}

    subprocess.run([*pip, "pytest", "hypothesis"], check=True, capture_output=True)
    tests = tmp_path / "config-bags-tests"
    shutil.copytree(ROOT / "packages/config-bags/tests", tests, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "packages/config-bags/README.md", tmp_path / "README.md")
    done = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tests)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout
