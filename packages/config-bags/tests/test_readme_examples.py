"""The README's examples run, so the README cannot rot: each ```python block runs as a script
in a fresh interpreter, in a folder of its own, under the default role checking (enforced, so
its roles are honest too). A block whose first line is `# <module>.py` is that module, written beside the
scripts for them to import, not run. Outside this workspace (tests/test_standalone_install.py)
the examples run in a venv holding config-bags alone, so they need nothing else."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)
MODULE_LINE = re.compile(r"# (\w+\.py)\n")


def _blocks() -> tuple[dict[str, str], list[str]]:
    """(module file name -> its code, the scripts in README order)."""
    modules: dict[str, str] = {}
    scripts: list[str] = []
    for code in BLOCK.findall(README.read_text()):
        named = MODULE_LINE.match(code)
        if named:
            modules[named.group(1)] = code
        else:
            scripts.append(code)
    return modules, scripts


MODULES, SCRIPTS = _blocks()


def test_the_readme_has_a_minimal_example_a_foreign_stack_and_loading() -> None:
    assert list(MODULES) == ["engine_config.py"]
    assert len(SCRIPTS) == 3


@pytest.mark.parametrize("index", range(len(SCRIPTS)), ids=["minimal", "foreign_stack", "loading"])
def test_a_readme_example_runs(tmp_path: Path, index: int) -> None:
    """Reverse-verified: with the README's refused override asking max_num_seqs=64 (allowed),
    the foreign-stack example failed on its assertion that nothing changed."""
    for name, code in MODULES.items():
        (tmp_path / name).write_text(code)
    script = tmp_path / "example.py"
    script.write_text(SCRIPTS[index])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CONFIG_BAGS_ROLE_CHECK")}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    if index == 1:
        refused = "refused: max_num_seqs = 8 requires max_num_seqs >= block_size = 32 (rule blocks_hold_a_batch)"
        assert done.stdout.strip() == refused
    if index == 2:  # the file's line, and the one-line refusal
        assert re.search(r"^  origin: .*engine\.toml:1$", done.stdout, re.M), done.stdout
        assert done.stdout.strip().endswith("unknown flag --block-sise; did you mean --block-size?")
