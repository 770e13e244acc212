"""`census PATH... [--record NAME ...] [--format table|json] [--baseline FILE] [--update-baseline]`

Counts, per function, the reads of a launch record in any Python tree, and the copies of bag
values into instance attributes. Exit status: 0, or 1 when a --baseline differs from the
census, or 2 for a bad argument.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from census.bag_names import assumed_bag_names, bag_names_from, bag_names_of_root, config_bags_bag_names
from census.baseline import BaselineError, ratchet_differences, read_baseline, write_baseline
from census.record_names import RecordNames
from census.report import COUNTS, as_json, as_table, counts_per_file
from census.scan import census_of
from census.schema import SchemaError, config_bags_schema, config_root_from, schema_from, schema_of_root
from census.stats import speed_of


def parser() -> argparse.ArgumentParser:
    """The census command line."""
    p = argparse.ArgumentParser(prog="census", description="AST census of reads of a launch record (server_args).")
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="Files or directories to scan.")
    p.add_argument(
        "--record", action="append", metavar="NAME", help="Name the record goes by (repeatable; default server_args)."
    )
    p.add_argument(
        "--record-type",
        action="append",
        metavar="CLASS",
        help="Annotation that marks a record parameter (repeatable; default ServerArgs).",
    )
    p.add_argument(
        "--exclude",
        action="append",
        default=[],
        type=Path,
        metavar="PATH",
        help="Leave out files under PATH (repeatable).",
    )
    p.add_argument(
        "--schema",
        metavar="SPEC",
        help="Leaf -> bag map: a .json file or module:callable (default: config_bags when importable).",
    )
    p.add_argument(
        "--bags",
        metavar="SPEC",
        help="Bag accessors, derived accessors and bag types, for the copies count: a .json file "
        '{"accessors": [...], "derived": [...], "types": [...]} or module:callable '
        "(default: config_bags when importable).",
    )
    p.add_argument(
        "--config-root",
        metavar="SPEC",
        help="The stack's config-bags root type (module:RootType): its leaf -> bag schema, and bag(), "
        "get_<namespace>() and its bag types for the copies count (--schema and --bags override either).",
    )
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--root", type=Path, help="Report paths relative to this directory (default: the current one).")
    p.add_argument(
        "--baseline", type=Path, metavar="FILE", help="Compare per-file counts with FILE; exit 1 when they differ."
    )
    p.add_argument("--count", choices=COUNTS, default="reads", help="What --baseline counts (default reads).")
    p.add_argument("--update-baseline", action="store_true", help="Write the census's counts to --baseline.")
    p.add_argument(
        "--stats", action="store_true", help="Print files/s of the census and of plain ast.parse over the same files."
    )
    return p


def main(argv: list[str] | None = None) -> int:
    """The console script."""
    args = parser().parse_args(argv)
    names = RecordNames(
        names=frozenset(args.record or ["server_args"]),
        types=frozenset(args.record_type or ["ServerArgs"]),
    )
    try:
        root = config_root_from(args.config_root) if args.config_root else None
        bag_of = (
            schema_from(args.schema) if args.schema else config_bags_schema() if root is None else schema_of_root(root)
        )
        if args.bags:
            bags = bag_names_from(args.bags)
        elif root is not None:
            bags = bag_names_of_root(root)
        else:
            bags = config_bags_bag_names()
            print(f"census: note: {assumed_bag_names(bags)}", file=sys.stderr)
    except SchemaError as err:
        print(f"census: error: {err}", file=sys.stderr)
        return 2
    missing = [p for p in args.paths if not p.exists()]
    if missing:
        print(f"census: error: no such file or directory: {missing[0]}", file=sys.stderr)
        return 2
    if args.update_baseline and args.baseline is None:
        print("census: error: --update-baseline needs --baseline FILE", file=sys.stderr)
        return 2
    if args.stats:
        print(speed_of(args.paths, names, bag_of, bags).summary())
        return 0
    warnings.simplefilter("always")
    warnings.showwarning = lambda message, *_rest: print(f"census: warning: {message}", file=sys.stderr)
    census = census_of(args.paths, names, bag_of, args.root, args.exclude, bags)
    print(as_json(census) if args.format == "json" else as_table(census))
    if args.baseline is None:
        return 0
    actual = counts_per_file(census, args.count)
    if args.update_baseline:
        write_baseline(args.baseline, actual, args.count)
        return 0
    try:
        differences = ratchet_differences(read_baseline(args.baseline), actual, args.count)
    except BaselineError as err:
        print(f"census: error: {err}", file=sys.stderr)
        return 2
    for line in differences:
        print(f"census: {line}", file=sys.stderr)
    return 1 if differences else 0
