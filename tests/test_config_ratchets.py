"""Ratchets on the launch record's reach, from the census of packages/ and the baselines in
tests/census_baselines/ (one `<count> <path>` line per file, so each change is a one-line diff).

- record reads outside `serve`: pinned at 0 (the baseline may never hold a line);
- record reads per file inside `serve`'s source: may only go down, and a drop must be recorded;
- dynamic findings (computed member names, vars(), __dict__, asdict(), and bindings that may hold
  the record where the census cannot name which part does): pinned at 0;
- exposure outside `serve` (functions that take the record, classes that park it): pinned at 0;
- copies of bag values into instance attributes in the runtime packages and config-bags' own
  source (`self.x = get_schedule().page_size`: the copy does not follow an override): pinned at 0.

There is no exemption list: the baselines are the only input. Update a baseline with the command
in the failure message.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from census import (
    Census,
    RecordNames,
    census_of,
    config_bags_bag_names,
    config_bags_schema,
    counts_per_file,
    ratchet_differences,
    read_baseline,
)

ROOT = Path(__file__).resolve().parents[1]
BASELINES = ROOT / "tests" / "census_baselines"
SERVE = "packages/serve/"
SERVE_SRC = "packages/serve/src/"
RUNTIME = (
    "packages/runtime-scheduler/",
    "packages/runtime-runner/",
    "packages/attn-backends/",
    "packages/spec-workers/",
    "packages/config-bags/src/",
)

UPDATE = {
    "reads_outside_serve.txt": (
        "uv run census packages/ --exclude packages/serve "
        "--baseline tests/census_baselines/reads_outside_serve.txt --update-baseline"
    ),
    "reads_in_serve.txt": (
        "uv run census packages/serve/src --baseline tests/census_baselines/reads_in_serve.txt --update-baseline"
    ),
    "exposure_outside_serve.txt": (
        "uv run census packages/ --exclude packages/serve --count exposure "
        "--baseline tests/census_baselines/exposure_outside_serve.txt --update-baseline"
    ),
    "dynamic.txt": (
        "uv run census packages/ --count dynamic --baseline tests/census_baselines/dynamic.txt --update-baseline"
    ),
    "copies_into_self.txt": (
        "uv run census packages/runtime-scheduler packages/runtime-runner packages/attn-backends "
        "packages/spec-workers packages/config-bags/src --count copies "
        "--baseline tests/census_baselines/copies_into_self.txt --update-baseline"
    ),
}


@pytest.fixture(scope="module")
def census() -> Census:
    return census_of([ROOT / "packages"], RecordNames(), config_bags_schema(), root=ROOT, bags=config_bags_bag_names())


def counted(census: Census, kind: str, where: Callable[[str], bool]) -> dict[str, int]:
    return {path: n for path, n in counts_per_file(census, kind).items() if where(path)}


def check(baseline_name: str, actual: dict[str, int], kind: str) -> None:
    baseline = read_baseline(BASELINES / baseline_name)
    differences = ratchet_differences(baseline, actual, kind)
    assert not differences, "\n".join([*differences, f"after a deliberate change: {UPDATE[baseline_name]}"])


def test_no_record_reads_outside_serve(census: Census) -> None:
    """Reverse-verified: a `server_args.page_size` read added to a runtime package module fails
    this test (checked by hand in attn_backends, then removed)."""
    assert read_baseline(BASELINES / "reads_outside_serve.txt") == {}, "reads outside serve are pinned at 0"
    check("reads_outside_serve.txt", counted(census, "reads", lambda p: not p.startswith(SERVE)), "reads")


def test_record_reads_per_file_inside_serve(census: Census) -> None:
    """Reverse-verified: one more record read in serve/record/handlers/spec.py fails this
    test, and so does one fewer."""
    check("reads_in_serve.txt", counted(census, "reads", lambda p: p.startswith(SERVE_SRC)), "reads")


def test_no_record_exposure_outside_serve(census: Census) -> None:
    """No function outside the composition root takes the record and no class there parks it:
    a runtime package is handed the values it needs (or reads its bags), never the record.

    Reverse-verified: `def probe(server_args: "ServerArgs") -> None` added to
    runtime_scheduler/admission.py fails this test, and so does a class there whose `__init__`
    parks a `cfg: "ServerArgs"` on `self` (both checked by hand, then removed)."""
    assert read_baseline(BASELINES / "exposure_outside_serve.txt") == {}, "exposure outside serve is pinned at 0"
    check("exposure_outside_serve.txt", counted(census, "exposure", lambda p: not p.startswith(SERVE)), "exposure")


def test_no_dynamic_reads(census: Census) -> None:
    """Reverse-verified: a `getattr(server_args, name)` added to a runtime package module fails
    this test (checked by hand in attn_backends, then removed)."""
    assert read_baseline(BASELINES / "dynamic.txt") == {}, "dynamic reads are pinned at 0"
    check("dynamic.txt", counted(census, "dynamic", lambda p: True), "dynamic")


def test_copies_of_bag_values_into_self_in_the_runtime_packages(census: Census) -> None:
    """Pinned at 0: the one copy the census first found (the scheduler kept the pool's slot
    count, falling back to `get_memory().max_total_tokens`) is gone; the runner's built pool is
    now always handed in.

    Reverse-verified: `self._page = get_schedule().page_size` added to
    runtime_runner/kv_pool.py's KVPool.__init__ fails this test, and so does the alias form
    (`schedule = get_schedule()` then `self._page = schedule.page_size`); both removed again."""
    assert config_bags_bag_names().accessors, "config_bags is installed here, so the census knows its accessors"
    assert read_baseline(BASELINES / "copies_into_self.txt") == {}, "copies into self are pinned at 0"
    check("copies_into_self.txt", counted(census, "copies", lambda p: p.startswith(RUNTIME)), "copies")


def test_the_ratchet_fails_when_a_count_grows_or_drops_unrecorded(census: Census) -> None:
    baseline = read_baseline(BASELINES / "reads_in_serve.txt")
    assert baseline, "serve holds the record, so it has reads to pin"
    file, count = sorted(baseline.items())[0]
    grown = ratchet_differences(baseline, {**baseline, file: count + 1}, "reads")
    dropped = ratchet_differences(baseline, {**baseline, file: count - 1}, "reads")
    assert grown == [f"{file}: reads grew from {count} to {count + 1}; read the value from its bag instead"]
    assert dropped == [f"{file}: reads dropped from {count} to {count - 1}; lower the baseline to record the progress"]
    assert ratchet_differences(baseline, {**baseline, "packages/new.py": 1}, "reads") == [
        "packages/new.py: reads grew from 0 to 1; read the value from its bag instead"
    ]
