"""The record's exposure: each function that takes it and each class that parks it, once, and the
`--count exposure` baseline that pins them per file."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from census import RecordNames, census_of, exposure
from census.cli import main

RUNNER = """\
    class Runner:
        def __init__(self, server_args, other: "ServerArgs"):
            self.args = server_args
            self.again = other

        def step(self):
            return self.args.page_size


    def build(cfg: ServerArgs, n=1):
        return cfg


    def plain(x):
        return x
    """


def write(tree: Path, files: dict[str, str]) -> Path:
    tree.mkdir()
    for name, text in files.items():
        (tree / name).write_text(textwrap.dedent(text), encoding="utf-8")
    return tree


def test_each_function_taking_and_class_parking_the_record_counts_once(tmp_path: Path) -> None:
    """`Runner.__init__` takes it (two parameters, one function), `Runner` parks it (two
    attributes, one class), `build` takes it; `plain` does not.

    Reverse-verified: with `exposure` leaving out the parkers, `Runner` is missing and this test
    fails."""
    tree = write(tmp_path / "tree", {"runner.py": RUNNER})
    found = exposure(census_of([tree], RecordNames(), {}, root=tree))
    assert [(e.path, e.line, e.kind, e.name) for e in found] == [
        ("runner.py", 2, "takes", "Runner.__init__"),
        ("runner.py", 3, "parks", "Runner"),
        ("runner.py", 10, "takes", "build"),
    ]


def test_the_exposure_baseline_ratchets_both_ways(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tree = write(tmp_path / "tree", {"runner.py": RUNNER, "clean.py": "def f(page_size):\n    return page_size\n"})
    baseline = tmp_path / "exposure.txt"
    args = [str(tree), "--root", str(tree), "--count", "exposure", "--baseline", str(baseline)]
    assert main([*args, "--update-baseline"]) == 0
    assert baseline.read_text().splitlines()[1:] == ["3 runner.py"]
    assert main(args) == 0
    (tree / "clean.py").write_text("def f(server_args):\n    return server_args\n")
    capsys.readouterr()
    assert main(args) == 1
    assert "clean.py: exposure grew from 0 to 1" in capsys.readouterr().err
