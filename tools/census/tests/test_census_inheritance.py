"""A record parked by a base class (`self._server_args = server_args` in `__init__`) is followed
into the methods of its subclasses: in the same module, and in other modules of the scanned
tree however they import the base. Each tree is written to a temporary folder and run through
`census_of` and the `census` command."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from census import RecordNames, census_of, census_of_source
from census.cli import main

# Parks the record under a name that does not spell it: a module of subclasses that reads
# `self.config.x` never spells the record, so only the class graph brings it into the census.
BASE = """\
    class Base:
        def __init__(self, server_args, rank):
            self.config = server_args
            self.rank = rank
    """


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return root


def inherited(root: Path) -> set[tuple[str, str, str]]:
    """(path, function, leaf) of every read the census counts as inherited."""
    census = census_of([root], RecordNames(), {}, root=root)
    return {(r.path, r.function, r.leaf) for r in census.reads if r.shape == "inherited"}


def test_a_subclass_in_the_same_module_several_levels_down() -> None:
    """The pattern of SGLang's srt/eplb/expert_distribution.py (2025): an accumulator base parks
    the record, a mixin subclass reads it in `__init__` and in a method, and a subclass of the
    mixin reads it again. Before this census followed base classes, none of these counted.

    Reverse-verified: with `_TreeScan.scan` ignoring what the class graph hands down (an empty
    mapping passed to ModuleScanner), this test fails."""
    source = textwrap.dedent(
        """\
        class Accumulator:
            def __init__(self, server_args, rank):
                self._server_args = server_args
                self._rank = rank


        class Mixin(Accumulator):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self._enabled = self._server_args.enable_metrics

            def to_device(self, counts):
                return counts.to(self._server_args.device)


        class Stat(Mixin):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, **kwargs)
                self._size = self._server_args.buffer_size

            def threshold(self):
                return self._server_args.rebalance_threshold


        class Sibling:
            def __init__(self, config):
                self._server_args = config

            def size(self):
                return self._server_args.buffer_size
        """
    )
    census = census_of_source(source, "accumulators.py", RecordNames(), {})
    found = {(r.line, r.function, r.leaf, r.shape) for r in census.reads}
    assert found == {
        (10, "Mixin.__init__", "enable_metrics", "inherited"),
        (13, "Mixin.to_device", "device", "inherited"),
        (19, "Stat.__init__", "buffer_size", "inherited"),
        (22, "Stat.threshold", "rebalance_threshold", "inherited"),
    }


@pytest.mark.parametrize(
    ("importing", "base"),
    [
        ("from pkg.base import Base", "Base"),
        ("from pkg.base import Base as Root", "Root"),
        ("import pkg.base as b", "b.Base"),
        ("import pkg.base", "pkg.base.Base"),
        ("from pkg import base", "base.Base"),
        ("from .base import Base", "Base"),
        ("from . import base", "base.Base"),
        ("from pkg import Base", "Base"),  # re-exported by pkg/__init__.py
        ("from . import Base", "Base"),
    ],
)
def test_a_subclass_in_another_module_however_it_imports_the_base(tmp_path: Path, importing: str, base: str) -> None:
    """The subclass module never spells the record, so only the class graph brings it in.

    Reverse-verified: with the expansion in `census_of_sources` removed (`subclassing` always
    empty), every case fails; with `_in_modules` stopping at the longest leading run (no
    re-export), the two `__init__` cases fail."""
    write_tree(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg.base import Base\n",
            "pkg/base.py": BASE,
            "pkg/worker.py": f"""\
                {importing}


                class Worker({base}):
                    def pages(self):
                        return self.config.page_size
                """,
        },
    )
    assert inherited(tmp_path) == {("pkg/worker.py", "Worker.pages", "page_size")}


def test_a_chain_across_three_modules_and_a_src_layout(tmp_path: Path) -> None:
    """A -> B -> C, each in its own module of an installed-layout package (`src/pkg/...`), the
    middle one importing relatively from a parent package; a class of the same name elsewhere
    in the tree is not mistaken for the base."""
    write_tree(
        tmp_path,
        {
            "lib/src/engine/__init__.py": "",
            "lib/src/engine/base.py": BASE,
            "lib/src/engine/runners/__init__.py": "",
            "lib/src/engine/runners/middle.py": """\
                from ..base import Base


                class Middle(Base):
                    def tp(self):
                        return self.config.tp_size
                """,
            "lib/src/engine/runners/leaf.py": """\
                from engine.runners.middle import Middle


                class Leaf(Middle):
                    def pp(self):
                        return self.config.pp_size
                """,
            "other/base.py": "class Base:\n    pass\n",
            "other/user.py": """\
                from base import Base


                class User(Base):
                    def pp(self):
                        return self.config.pp_size
                """,
        },
    )
    assert inherited(tmp_path) == {
        ("lib/src/engine/runners/middle.py", "Middle.tp", "tp_size"),
        ("lib/src/engine/runners/leaf.py", "Leaf.pp", "pp_size"),
    }


def test_a_subclass_parks_it_again_and_writes_through_it(tmp_path: Path) -> None:
    """A subclass that re-parks the inherited record reads it as its own parking ("parked"),
    and an assignment through the inherited attribute is a write."""
    write_tree(
        tmp_path,
        {
            "base.py": BASE,
            "sub.py": """\
                from base import Base


                class Sub(Base):
                    def setup(self):
                        self.cfg = self.config
                        self.config.page_size = 16

                    def read(self):
                        return self.cfg.context_length
                """,
        },
    )
    census = census_of([tmp_path], RecordNames(), {}, root=tmp_path)
    assert {(r.path, r.function, r.leaf, r.shape) for r in census.reads} == {
        ("sub.py", "Sub.read", "context_length", "parked")
    }
    assert [(w.path, w.function, w.leaf) for w in census.writes] == [("sub.py", "Sub.setup", "page_size")]


def test_the_command_reports_inherited_reads_in_its_totals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_tree(
        tmp_path,
        {
            "base.py": BASE,
            "sub.py": (
                "from base import Base\n\nclass Sub(Base):\n    def f(self):\n        return self.config.page_size\n"
            ),
        },
    )
    assert main([str(tmp_path), "--root", str(tmp_path), "--format", "json"]) == 0
    totals = json.loads(capsys.readouterr().out)["totals"]
    assert totals["reads_by_shape"]["inherited"] == 1 and totals["reads"] == 1
    assert main([str(tmp_path), "--root", str(tmp_path)]) == 0
    assert "parked 0, inherited 1)" in capsys.readouterr().out
