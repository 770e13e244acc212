"""`census --stats`: how fast the census runs, next to plain `ast.parse` of the same files in
the same run (both single-threaded, sources read into memory first, best of `repeats`)."""

from __future__ import annotations

import ast
import time
from dataclasses import dataclass
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path

from census.module_scan import RecordNames
from census.scan import census_of_source, mentions_record
from census.sources import python_files


@dataclass(frozen=True)
class SpeedFigures:
    """Files per second of the census and of the parse-only baseline."""

    files: int
    lines: int
    mentioning: int
    census_files_per_s: float
    full_census_files_per_s: float
    parse_files_per_s: float

    def summary(self) -> str:
        return (
            f"{self.files} files ({self.mentioning} spell the record), {self.lines} lines: "
            f"census {self.census_files_per_s:,.0f} files/s; "
            f"census parsing and walking every file {self.full_census_files_per_s:,.0f} files/s; "
            f"ast.parse alone {self.parse_files_per_s:,.0f} files/s"
        )


def _best(seconds: list[float]) -> float:
    return min(seconds) if seconds else float("nan")


def speed_of(paths: Sequence[Path], names: RecordNames, bag_of: Mapping[str, str], repeats: int = 3) -> SpeedFigures:
    """Time the census and plain ast.parse over the files under `paths`."""
    sources = [(f.as_posix(), f.read_text(encoding="utf-8", errors="replace")) for f in python_files(paths)]
    parse_times: list[float] = []
    census_times: list[float] = []
    full_times: list[float] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(repeats):
            start = time.perf_counter()
            for path, text in sources:
                try:
                    ast.parse(text, filename=path)
                except (SyntaxError, ValueError):
                    pass
            parse_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            for path, text in sources:
                census_of_source(text, path, names, bag_of)
            census_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            for path, text in sources:
                census_of_source(text, path, names, bag_of, prefilter=False)
            full_times.append(time.perf_counter() - start)
    files = len(sources)
    return SpeedFigures(
        files=files,
        lines=sum(text.count("\n") for _, text in sources),
        mentioning=sum(1 for _, text in sources if mentions_record(text, names)),
        census_files_per_s=files / _best(census_times),
        full_census_files_per_s=files / _best(full_times),
        parse_files_per_s=files / _best(parse_times),
    )
