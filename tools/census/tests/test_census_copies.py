"""Copies of bag values into instance attributes (`self.x = get_schedule().page_size`): a copy
keeps the value it had then, so it does not follow an override. A runtime module written every
way a consumer copies (and several ways it reads at the moment of use instead) is written to a
temporary folder and run through `census_of` and the `census` command."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from census import BagNames, RecordNames, census_of, census_of_source, config_bags_bag_names
from census.cli import main

BAGS = BagNames(
    accessors=frozenset({"get_schedule", "get_exec", "get_memory"}),
    derived=frozenset({"attention_backends", "chunk_size", "chunk_size_of"}),
    types=frozenset({"ScheduleBag", "KernelBag"}),
)
SCHEMA = {
    "page_size": "schedule",
    "schedule_policy": "schedule",
    "max_running_requests": "schedule",
    "max_prefill_tokens": "schedule",
    "max_queued_requests": "schedule",
    "max_total_tokens": "memory",
    "attention_backend": "exec.kernel",
    "cuda_graph_decode_bs": "exec.graph",
}
MARK = re.compile(r"# copies: (.+)$")

RUNTIME_MODULE = '''\
"""A consumer of the bags. Each line that copies names, in a comment, the leaves it copies."""

import config_bags
import config_bags as cb
from config_bags import KernelBag, ScheduleBag, attention_backends, chunk_size, chunk_size_of, get_exec, get_schedule
from config_bags import get_memory as memory_bag


class Pool:
    def __init__(self, schedule: ScheduleBag, kernel: "KernelBag | None", n: int) -> None:
        self._page = get_schedule().page_size  # copies: page_size
        self.backend = get_exec().kernel.attention_backend  # copies: attention_backend
        bag = get_schedule()
        alias = bag
        self.policy = alias.schedule_policy  # copies: schedule_policy
        self.size: int = schedule.page_size  # copies: page_size
        self.named = kernel.attention_backend  # copies: attention_backend
        self.bag = get_schedule()  # copies: -
        self.kernel = cb.get_exec().kernel  # copies: kernel
        self.chunk = chunk_size()  # copies: -
        self.chunk_of = chunk_size_of(bag)  # copies: -
        self.prefill, self.decode = attention_backends()  # copies: - -
        self.slots = n if n else memory_bag().max_total_tokens  # copies: max_total_tokens
        self.limits = (get_schedule().max_running_requests, n)  # copies: max_running_requests
        self.stats.first = int(get_schedule().max_prefill_tokens)  # copies: max_prefill_tokens
        self.by_name["page"] = get_schedule().page_size  # copies: page_size
        if (queued := get_schedule().max_queued_requests) is not None:
            self.queue_cap = queued  # copies: max_queued_requests
        ps, other = get_schedule().page_size, n
        self.ps, self.other = ps, other  # copies: page_size
        first, *rest = config_bags.get_exec().graph.cuda_graph_decode_bs
        self.first = first  # copies: cuda_graph_decode_bs
        self.rest = rest  # copies: cuda_graph_decode_bs
        setattr(self, "literal", get_schedule().page_size)  # copies: page_size

        def later() -> None:
            self.late = bag.page_size  # copies: page_size

        self.later = later

    @classmethod
    def build(cls) -> "Pool":
        cls.default_page = get_schedule().page_size  # copies: page_size
        return cls(get_schedule(), None, 1)

    def reads_at_the_moment_of_use(self) -> int:
        page = get_schedule().page_size
        self.used = self.pages_for(page)
        return page * len(self.by_name)

    def new_values_and_other_targets(self, schedule, other) -> None:
        self.deadline = get_schedule().page_size * 4
        self.pool = make_pool(get_schedule().page_size)
        self.total += get_schedule().page_size
        other.page = get_schedule().page_size
        self.unannotated = schedule.page_size
        bag = get_schedule()
        bag = None
        self.gone = bag
        for bag in (1, 2):
            self.loop = bag
        self.label = f"{get_schedule().schedule_policy}"


PAGE = get_schedule().page_size
'''


def marked(source: str) -> Counter[tuple[int, str | None]]:
    found: Counter[tuple[int, str | None]] = Counter()
    for number, line in enumerate(source.splitlines(), 1):
        match = MARK.search(line)
        if match:
            found.update((number, None if leaf == "-" else leaf) for leaf in match.group(1).split())
    return found


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "runtime").mkdir()
    (tmp_path / "runtime" / "pool.py").write_text(RUNTIME_MODULE, encoding="utf-8")
    return tmp_path


def test_every_form_of_copy_is_counted_and_nothing_else(tree: Path) -> None:
    """Accessor reads, sub-bags, local aliases (of aliases, tuples, `:=`, starred, closures),
    parameters annotated with a bag type, whole bags, derived accessors, annotated targets,
    chained and subscripted targets, literal setattr, a renamed import; not arithmetic, calls,
    `+=`, other objects' attributes, f-strings, unannotated parameters, rebound names, or a
    module-level constant.

    Reverse-verified: with the copy branch of `_bind_attribute` removed, this test fails; so it
    does with `BagValues.of` following no local (the Name case answering None)."""
    census = census_of([tree], RecordNames(), SCHEMA, root=tree, bags=BAGS)
    assert Counter((c.line, c.leaf) for c in census.copies) == marked(RUNTIME_MODULE)
    first = census.copies[0]
    assert (first.path, first.function, first.target, first.value, first.leaf, first.bag) == (
        "runtime/pool.py",
        "Pool.__init__",
        "self._page",
        "get_schedule().page_size",
        "page_size",
        "schedule",
    )
    assert {c.function for c in census.copies} == {"Pool.__init__", "Pool.__init__.later", "Pool.build"}
    assert census.reads == [] and census.writes == []


def test_without_bag_names_no_copy_is_counted(tree: Path) -> None:
    """The census runs on any tree: with no bag names it knows no bag and counts no copy."""
    assert census_of([tree], RecordNames(), SCHEMA, root=tree).copies == []


def test_this_repositorys_bag_names(tree: Path) -> None:
    names = config_bags_bag_names()
    assert {"get_schedule", "get_exec", "get_memory", "get_model", "get_device"} <= names.accessors
    assert {
        "attention_backends",
        "chunk_size",
        "max_prefill_buffer_tokens",
        "chunk_size_of",
        "max_total_tokens_of",
    } <= names.derived
    assert {"Bags", "ScheduleBag", "KernelBag", "GraphBag"} <= names.types
    assert Counter(
        (c.line, c.leaf) for c in census_of([tree], RecordNames(), SCHEMA, root=tree, bags=names).copies
    ) == marked(RUNTIME_MODULE)


def test_importing_census_does_not_import_config_bags() -> None:
    """The census must run on any tree: its bag names are looked up only when asked for."""
    code = "import sys, census, census.cli; assert 'config_bags' not in sys.modules, sorted(sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_the_command_counts_copies_and_ratchets_them(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bags = tmp_path / "bags.json"
    bags.write_text(
        json.dumps({"accessors": sorted(BAGS.accessors), "derived": sorted(BAGS.derived), "types": sorted(BAGS.types)})
    )
    schema = tmp_path / "schema.json"
    schema.write_text(json.dumps(SCHEMA))
    args = [str(tree / "runtime"), "--root", str(tree), "--bags", str(bags), "--schema", str(schema)]
    expected = sum(marked(RUNTIME_MODULE).values())

    assert main([*args, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["copies"]) == doc["totals"]["copies"] == expected
    assert set(doc["copies"][0]) == {"path", "line", "function", "target", "value", "leaf", "bag"}
    assert doc["totals"]["copies_by_folder"] == {"runtime": expected}

    assert main(args) == 0
    out = capsys.readouterr().out
    assert "runtime/pool.py:11 Pool.__init__: self._page = get_schedule().page_size" in out
    assert out.strip().splitlines()[-1].endswith(f"{expected} copies into self")

    baseline = tmp_path / "copies.txt"
    assert main([*args, "--count", "copies", "--baseline", str(baseline), "--update-baseline"]) == 0
    assert baseline.read_text().splitlines()[1:] == [f"{expected} runtime/pool.py"]
    capsys.readouterr()
    (tree / "runtime" / "more.py").write_text(
        "from config_bags import get_schedule\n\n"
        "class A:\n    def __init__(self):\n        self.p = get_schedule().page_size\n"
    )
    assert main([*args, "--count", "copies", "--baseline", str(baseline)]) == 1
    assert "runtime/more.py: copies grew from 0 to 1" in capsys.readouterr().err


def test_bag_names_from_a_module_callable_and_bad_ones(
    tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = [str(tree), "--root", str(tree), "--format", "json"]
    assert main([*args, "--bags", "census.bag_names:config_bags_bag_names"]) == 0
    assert json.loads(capsys.readouterr().out)["totals"]["copies"] == sum(marked(RUNTIME_MODULE).values())
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"accessor": ["get_schedule"]}))
    assert main([*args, "--bags", str(bad)]) == 2
    assert "bag names must be a mapping with lists of names under accessors, derived, types" in capsys.readouterr().err
    assert main([*args, "--bags", "no_such_module:names"]) == 2
    assert "cannot import the bag names" in capsys.readouterr().err


def test_a_copy_in_a_dedented_snippet_is_found_on_its_line() -> None:
    """Line numbers are the file's, as for reads (a ratchet names the line to change)."""
    source = textwrap.dedent(
        """\
        from config_bags import get_schedule


        class Runner:
            def __init__(self):
                self.page = get_schedule().page_size
        """
    )
    census = census_of_source(source, "runner.py", RecordNames(), SCHEMA, bags=BAGS)
    assert [(c.line, c.target, c.bag) for c in census.copies] == [(6, "self.page", "schedule")]
