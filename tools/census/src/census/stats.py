"""`census --stats`: how fast the census runs, next to plain `ast.parse` of the same files in
the same run (both single-threaded, sources read into memory first, best of `repeats`)."""

from __future__ import annotations

import ast
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from census.bag_names import NO_BAGS, BagNames
from census.record_names import RecordNames
from census.scan import census_of_sources, mentions_record, read_sources


@dataclass(frozen=True)
class SpeedFigures:
    """Files per second of the census and of the parse-only baseline."""

    files: int
    lines: int
    mentioning: int
    mentioning_bags: int
    census_files_per_s: float
    full_census_files_per_s: float
    parse_files_per_s: float

    def summary(self) -> str:
        return (
            f"{self.files} files ({self.mentioning} spell the record, {self.mentioning_bags} a bag name), "
            f"{self.lines} lines: "
            f"census {self.census_files_per_s:,.0f} files/s; "
            f"census parsing and walking every file {self.full_census_files_per_s:,.0f} files/s; "
            f"ast.parse alone {self.parse_files_per_s:,.0f} files/s"
        )


def _best(seconds: list[float]) -> float:
    return min(seconds) if seconds else float("nan")


def speed_of(
    paths: Sequence[Path], names: RecordNames, bag_of: Mapping[str, str], bags: BagNames = NO_BAGS, repeats: int = 3
) -> SpeedFigures:
    """Time the census (one tree, as `census` runs it) and plain ast.parse over the files under
    `paths`; a file that cannot be read as UTF-8 is left out of both."""
    files, _ = read_sources(paths)
    sources = [(f.shown, f.text) for f in files]
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
            census_of_sources(files, names, bag_of, bags)
            census_times.append(time.perf_counter() - start)
            start = time.perf_counter()
            census_of_sources(files, names, bag_of, bags, prefilter=False)
            full_times.append(time.perf_counter() - start)
    count = len(sources)
    return SpeedFigures(
        files=count,
        lines=sum(text.count("\n") for _, text in sources),
        mentioning=sum(1 for _, text in sources if mentions_record(text, names)),
        mentioning_bags=sum(1 for _, text in sources if bags.spelled_in(text)),
        census_files_per_s=count / _best(census_times),
        full_census_files_per_s=count / _best(full_times),
        parse_files_per_s=count / _best(parse_times),
    )
