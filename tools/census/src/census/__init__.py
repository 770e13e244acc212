"""census: an AST census of reads of a flat launch record (`server_args`) in any Python tree.

It counts reads per function through every shape the record takes (direct, local alias,
literal getattr, attribute-parked alias, alias parked by a base class), following every way
Python binds a name; reports computed-name reads, and bindings that may hold the record where it
cannot name which part does, as blind spots; counts writes apart, lists the functions that take
the record and the classes that park it, counts copies of bag values into instance attributes,
and keeps per-file baselines for ratchet tests.
"""

from census.bag_names import BagNames, bag_names_from, config_bags_bag_names
from census.baseline import ratchet_differences, read_baseline, write_baseline
from census.exposure import Exposure, exposure
from census.findings import SHAPES, Copy, DynamicRead, Parker, Read, Shape, Taker, Write
from census.record_names import RecordNames
from census.report import COUNTS, as_json, as_table, counts_per_file, totals
from census.scan import Census, SourceFile, census_of, census_of_source, census_of_sources
from census.schema import config_bags_schema, schema_from

__all__ = [
    "COUNTS",
    "SHAPES",
    "BagNames",
    "Census",
    "Copy",
    "DynamicRead",
    "Exposure",
    "Parker",
    "Read",
    "RecordNames",
    "Shape",
    "SourceFile",
    "Taker",
    "Write",
    "as_json",
    "as_table",
    "bag_names_from",
    "census_of",
    "census_of_source",
    "census_of_sources",
    "config_bags_bag_names",
    "config_bags_schema",
    "counts_per_file",
    "exposure",
    "ratchet_differences",
    "read_baseline",
    "schema_from",
    "totals",
    "write_baseline",
]
