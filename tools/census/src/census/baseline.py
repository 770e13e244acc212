"""Baselines: one line per file, `<count> <path>`, so each change is a one-line diff.

A ratchet compares a census with its baseline and fails both ways: a count above the baseline
is a regression; a count below it is progress that must be recorded by lowering the baseline.
"""

from __future__ import annotations

from pathlib import Path

HEADER = "# census baseline: {kind} per file; lower it when a count drops (census ... --update-baseline)\n"


class BaselineError(ValueError):
    """A baseline line that is not `<count> <path>`."""


def read_baseline(path: Path) -> dict[str, int]:
    """The counts in `path` (a missing file reads as empty)."""
    if not path.exists():
        return {}
    counts: dict[str, int] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        count, _, file = line.partition(" ")
        if not count.isdigit() or not file:
            raise BaselineError(f"{path}:{number}: expected '<count> <path>', got {line!r}")
        counts[file] = int(count)
    return counts


def baseline_text(counts: dict[str, int], kind: str) -> str:
    """The baseline file for `counts` (files with 0 are left out)."""
    body = "".join(f"{count} {file}\n" for file, count in sorted(counts.items()) if count)
    return HEADER.format(kind=kind) + body


def write_baseline(path: Path, counts: dict[str, int], kind: str) -> None:
    """Write `counts` as the new baseline."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(baseline_text(counts, kind), encoding="utf-8")


def ratchet_differences(baseline: dict[str, int], actual: dict[str, int], kind: str) -> list[str]:
    """One line per file whose count differs from its baseline (empty: the ratchet holds)."""
    problems = []
    for file in sorted(set(baseline) | set(actual)):
        was, now = baseline.get(file, 0), actual.get(file, 0)
        if now > was:
            problems.append(f"{file}: {kind} grew from {was} to {now}; read the value from its bag instead")
        elif now < was:
            problems.append(f"{file}: {kind} dropped from {was} to {now}; lower the baseline to record the progress")
    return problems
