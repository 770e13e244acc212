"""The census as JSON or as a table, and its totals."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

from census.exposure import Exposure, exposure
from census.findings import SHAPES, Copy, DynamicRead, Read, Write
from census.scan import Census


def top_folder(path: str) -> str:
    """The first two folders of a reported path (`packages/serve`), or its first one."""
    parts = path.split("/")[:-1]
    return "/".join(parts[:2]) or "."


def totals(census: Census) -> dict[str, Any]:
    """Counts: files, skipped, reads (by shape, bag and top folder), writes, dynamic findings,
    takers, parkers, exposure (functions that take the record and classes that park it), copies
    of bag values into instance attributes (and by top folder)."""
    by_bag = Counter(r.bag or "(not a leaf)" for r in census.reads)
    by_folder = Counter(top_folder(r.path) for r in census.reads)
    return {
        "files": census.files,
        "skipped": len(census.skipped),
        "reads": len(census.reads),
        "reads_by_shape": {shape: sum(1 for r in census.reads if r.shape == shape) for shape in SHAPES},
        "reads_by_bag": dict(sorted(by_bag.items())),
        "reads_by_folder": dict(sorted(by_folder.items())),
        "writes": len(census.writes),
        "dynamic": len(census.dynamic),
        "takers": len(census.takers),
        "parkers": len(census.parkers),
        "exposure": len(exposure(census)),
        "copies": len(census.copies),
        "copies_by_folder": dict(sorted(Counter(top_folder(c.path) for c in census.copies).items())),
    }


# What a baseline may count (`census --count`).
COUNTS = ("reads", "writes", "dynamic", "copies", "exposure")


def counts_per_file(census: Census, kind: str) -> dict[str, int]:
    """reads, writes, dynamic findings, copies, or exposure (functions that take the record and
    classes that park it) per file (files with none are absent)."""
    found: dict[str, Sequence[Read | Write | DynamicRead | Copy | Exposure]] = {
        "reads": census.reads,
        "writes": census.writes,
        "dynamic": census.dynamic,
        "copies": census.copies,
        "exposure": exposure(census),
    }
    if kind not in found:
        raise ValueError(f"unknown count {kind!r}; accepted: {', '.join(COUNTS)}")
    return dict(sorted(Counter(f.path for f in found[kind]).items()))


def as_json(census: Census) -> str:
    """The documented JSON: reads, dynamic, writes, takers, parkers, exposure, copies, skipped,
    totals."""
    document = {
        "reads": [asdict(r) for r in census.reads],
        "dynamic": [asdict(d) for d in census.dynamic],
        "writes": [asdict(w) for w in census.writes],
        "takers": [asdict(t) for t in census.takers],
        "parkers": [asdict(p) for p in census.parkers],
        "exposure": [asdict(e) for e in exposure(census)],
        "copies": [asdict(c) for c in census.copies],
        "skipped": census.skipped,
        "totals": totals(census),
    }
    return json.dumps(document, indent=2)


def as_table(census: Census) -> str:
    """One row per function that reads the record, then the blind spots, writes, exposure,
    copies and totals."""
    rows: dict[tuple[str, str], Counter[str]] = {}
    leaves: dict[tuple[str, str], set[str]] = {}
    for r in census.reads:
        key = (r.path, r.function)
        rows.setdefault(key, Counter())[r.shape] += 1
        leaves.setdefault(key, set()).add(r.leaf if r.bag is None else f"{r.bag}.{r.leaf}")
    lines = [f"{'reads':>5} {'dir':>4} {'ali':>4} {'get':>4} {'prk':>4} {'inh':>4}  function  (leaves)"]
    for key in sorted(rows):
        c = rows[key]
        shapes = " ".join(f"{c[s]:>4}" for s in SHAPES)
        lines.append(f"{sum(c.values()):>5} {shapes}  {key[0]}::{key[1]}  ({', '.join(sorted(leaves[key]))})")
    if census.dynamic:
        lines.append("")
        lines.append(
            "dynamic (blind spots: a computed member, or a binding that may hold the record in a part it cannot name):"
        )
        lines += [f"  {d.path}:{d.line} {d.function}: {d.kind}: {d.expr}" for d in census.dynamic]
    if census.writes:
        lines.append("")
        lines.append("writes:")
        lines += [f"  {w.path}:{w.line} {w.function}: {w.leaf}" for w in census.writes]
    exposed = exposure(census)
    if exposed:
        lines.append("")
        lines.append("exposure (functions that take the record, classes that park it):")
        lines += [f"  {e.path}:{e.line} {e.kind} {e.name}" for e in exposed]
    if census.copies:
        lines.append("")
        lines.append("copies of bag values into instance attributes (they do not follow an override):")
        lines += [f"  {c.path}:{c.line} {c.function}: {c.target} = {c.value}" for c in census.copies]
    t = totals(census)
    shapes = ", ".join(f"{k} {v}" for k, v in t["reads_by_shape"].items())
    lines.append("")
    folders = ", ".join(f"{folder} {n}" for folder, n in t["reads_by_folder"].items()) or "none"
    lines.append(f"reads by folder: {folders}")
    lines.append(
        f"totals: {t['files']} files ({t['skipped']} skipped), {t['reads']} reads ({shapes}), "
        f"{t['writes']} writes, {t['dynamic']} dynamic, {t['takers']} record-taking parameters, "
        f"{t['parkers']} places parking it, {t['exposure']} functions and classes holding it, "
        f"{t['copies']} copies into self"
    )
    return "\n".join(lines)
