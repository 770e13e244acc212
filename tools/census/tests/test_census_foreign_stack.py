"""Issue 41, part 4: the census counts the copies of another stack's bag values, through the
names its own config-bags root gives (`bag()`, `get_<namespace>()`, its bag types), takes that
root as its schema directly, and says what it assumed when handed none."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from census.cli import main

pytest.importorskip("config_bags")

STACK_CONFIG = '''\
from typing import Annotated

from config_bags import Bag, PositiveInt, Root, accessor, leaf


class CacheBag(Bag):
    """The cache."""

    entries: Annotated[PositiveInt, leaf("Entries the cache holds.", hot=True)] = 1024
    ways: Annotated[PositiveInt, leaf("Ways per set.", hot=False)] = 4


class StackRoot(Root):
    cache: CacheBag = CacheBag()


get_cache = accessor(StackRoot, "cache", lambda root: root.cache)
'''

CONSUMER = """\
from config_bags import bag
from stack_config import CacheBag, get_cache


class Cache:
    def __init__(self, cache: CacheBag) -> None:
        self.entries = get_cache().entries
        self.ways = bag(CacheBag).ways
        self.size = cache.entries
"""


@pytest.fixture
def stack(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "stack_config.py").write_text(STACK_CONFIG)
    (tmp_path / "consumer.py").write_text(CONSUMER)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def _copies(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[list[tuple[int, str, str | None]], str]:
    assert main([*argv, "--format", "json"]) == 0
    captured = capsys.readouterr()
    copies = json.loads(captured.out)["copies"]
    return sorted((c["line"], c["leaf"], c["bag"]) for c in copies), captured.err


def test_the_copies_of_a_foreign_stack_are_counted_through_its_root(
    stack: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Reverse-verified: without `bag` among the root's accessor names, the bag(CacheBag) copy
    on line 8 was not counted."""
    copies, err = _copies([str(stack / "consumer.py"), "--config-root", "stack_config:StackRoot"], capsys)
    assert copies == [(7, "entries", "cache"), (8, "ways", "cache"), (9, "entries", "cache")]
    assert err == ""


def test_the_schema_can_be_the_root_type_itself(stack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = textwrap.dedent("""\
        def f(server_args):
            return server_args.entries
        """)
    (stack / "reader.py").write_text(source)
    assert main([str(stack / "reader.py"), "--schema", "stack_config:StackRoot", "--format", "json"]) == 0
    reads = json.loads(capsys.readouterr().out)["reads"]
    assert [(r["leaf"], r["bag"]) for r in reads] == [("entries", "cache")]


def test_with_no_root_the_census_says_what_it_assumed(stack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Handed no root, it counts through this repository's accessors, which the foreign stack
    does not spell except `bag()`, and says so on stderr."""
    copies, err = _copies([str(stack / "consumer.py")], capsys)
    assert (8, "ways", None) in copies
    assert err.startswith("census: note: no --config-root or --bags given: counting copies through this repository's")


def test_a_config_root_that_is_no_root_is_refused(stack: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(stack), "--config-root", "stack_config:CacheBag"]) == 2
    assert "accepted: module:RootType naming a config_bags.Root subclass" in capsys.readouterr().err
