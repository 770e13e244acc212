"""census: an AST census of reads of a flat launch record (`server_args`) in any Python tree.

It counts reads per function through every shape the record takes (direct, local alias,
literal getattr, attribute-parked alias, alias parked by a base class), reports computed-name
reads as blind spots, counts writes apart, counts copies of bag values into instance attributes,
and keeps per-file baselines for ratchet tests.
"""

from census.bag_names import BagNames, bag_names_from, config_bags_bag_names
from census.baseline import ratchet_differences, read_baseline, write_baseline
from census.findings import SHAPES, Copy, DynamicRead, Read, Shape, Taker, Write
from census.module_scan import RecordNames
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
    "ratchet_differences",
    "read_baseline",
    "schema_from",
    "totals",
    "write_baseline",
]
