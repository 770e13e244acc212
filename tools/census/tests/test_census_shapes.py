"""The census over a fixture tree written like a real serving engine: every read shape (a record
parked by a base class in another module too), the blind spot and the writes, each checked
line for line against the `# census:` markers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from census import RecordNames, census_of
from census.scan import Census

TREE = Path(__file__).parent / "fixtures" / "serving_tree"
MARK = re.compile(r"# census: (.+)$")


def marked(kind: str) -> set[tuple[str, int, str]]:
    """(file, line, member) for every `# census: <kind> <member>` marker in the tree."""
    found = set()
    for path in sorted(TREE.rglob("*.py")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            match = MARK.search(line)
            if match is None:
                continue
            for entry in match.group(1).split(","):
                what, member = entry.split()
                if what == kind:
                    found.add((path.relative_to(TREE).as_posix(), number, member))
    return found


@pytest.fixture(scope="module")
def census() -> Census:
    return census_of([TREE], RecordNames(), {"page_size": "schedule", "tp_size": "parallel"}, root=TREE)


def reads_of(census: Census, shape: str) -> set[tuple[str, int, str]]:
    return {(r.path, r.line, r.leaf) for r in census.reads if r.shape == shape}


def test_direct_reads(census: Census) -> None:
    """`server_args.x`, `self.server_args.x`, `a.b.server_args.x`, a parameter annotated
    `Optional[ServerArgs]`.

    Reverse-verified: with `RecordValues.shape` answering a Name only from the alias table (record names
    not recognised), this test fails."""
    assert reads_of(census, "direct") == marked("direct")


def test_alias_reads(census: Census) -> None:
    """`sa = self.server_args` then `sa.x`; tuple, walrus and `with` bindings; an alias of an
    alias; a closure over an alias; rebinding (`sa = None`, then a loop over
    ints) ends the alias.

    Reverse-verified: with `_bind_name` never recording an alias, this test fails."""
    assert reads_of(census, "alias") == marked("alias")


def test_getattr_reads(census: Census) -> None:
    """`getattr(record, "leaf", default)` and `hasattr(record, "leaf")` with a literal name.

    Reverse-verified: with the literal branch of `_call` removed, this test fails."""
    assert reads_of(census, "getattr") == marked("getattr")


def test_parked_reads(census: Census) -> None:
    """`self.args = server_args` in one method, `self.args.x` in another (also one that comes
    first in the file, and an attribute parked from a parked one); not in a class that never
    parks the record.

    Reverse-verified: with `_bind_attribute` no longer adding to `scope.parked`, this test
    fails."""
    assert reads_of(census, "parked") == marked("parked")


def test_reads_through_a_record_parked_by_a_base_class(census: Census) -> None:
    """`Scheduler` parks the record in engine/scheduler.py; its subclasses in
    engine/overlap_scheduler.py (a module that never spells the record, importing the base as
    `from engine import scheduler`) read it, one and two levels down; `FutureMap`, no
    subclass, reads its own `args`.

    Reverse-verified: with `RecordValues.shape` answering None for an inherited attribute (only the
    class's own parking followed), this test fails; so it does with the class graph's
    rounds in `census_of_sources` removed."""
    assert reads_of(census, "inherited") == marked("inherited")
    assert {r.function for r in census.reads if r.shape == "inherited"} == {
        "OverlapScheduler.overlap",
        "OverlapScheduler.budget",
        "TwoBatchScheduler.__init__",
    }


def test_dynamic_reads_are_reported_never_dropped(census: Census) -> None:
    """getattr/setattr with a computed name, vars(), __dict__ and asdict() are blind spots.

    Reverse-verified: with `_call` skipping the non-literal getattr (no `_dynamic` call),
    this test fails."""
    assert {(d.path, d.line, d.kind) for d in census.dynamic} == marked("dynamic")
    assert not {(r.path, r.line) for r in census.reads} & {(d.path, d.line) for d in census.dynamic}


def test_writes_are_counted_apart_from_reads(census: Census) -> None:
    """Assignment, augmented assignment, literal setattr, del and tuple targets.

    Reverse-verified: with the record branch of `_bind_attribute` removed, the writes
    are no longer found and this test fails."""
    assert {(w.path, w.line, w.leaf) for w in census.writes} == marked("write")
    assert not {(r.path, r.line) for r in census.reads} & {(w.path, w.line) for w in census.writes}


def test_reads_are_attributed_to_functions_and_mapped_to_bags(census: Census) -> None:
    by_line = {(r.path, r.line): r for r in census.reads}
    runner = by_line[("engine/model_runner.py", 12)]
    assert (runner.function, runner.leaf, runner.bag) == ("ModelRunner.__init__", "page_size", "schedule")
    assert {r.function for r in census.reads if r.leaf == "dp_size"} == {"closure.inner", "build_for_test"}
    assert [r.function for r in census.reads if r.leaf == "max_running_requests"] == ["Scheduler.get_next_batch"]
    assert {r.bag for r in census.reads if r.leaf == "tp_size"} == {"parallel"}
    assert {r.bag for r in census.reads if r.leaf == "max_total_tokens"} == {None}


def test_record_taking_functions_are_listed(census: Census) -> None:
    takers = {(t.path, t.function, t.parameter) for t in census.takers}
    assert ("engine/model_runner.py", "ModelRunner.__init__", "server_args") in takers
    assert ("engine/scheduler.py", "Scheduler.check", "args") in takers
    assert ("engine/scheduler.py", "NotAScheduler.__init__", "args") not in takers


def test_other_record_names() -> None:
    census = census_of([TREE], RecordNames(names=frozenset({"port_args"}), types=frozenset()), {}, root=TREE)
    assert {(r.path, r.leaf, r.shape) for r in census.reads} == {
        ("engine/scheduler.py", "tokenizer_ipc_name", "direct")
    }
