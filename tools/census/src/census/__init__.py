"""census: an AST census of reads of a flat launch record (`server_args`) in any Python tree.

It counts reads per function through every shape the record takes (direct, local alias,
literal getattr, attribute-parked alias), reports computed-name reads as blind spots, counts
writes apart, and keeps per-file baselines for ratchet tests.
"""

from census.baseline import ratchet_differences, read_baseline, write_baseline
from census.findings import SHAPES, DynamicRead, Read, Shape, Taker, Write
from census.module_scan import RecordNames
from census.report import as_json, as_table, counts_per_file, totals
from census.scan import Census, census_of, census_of_source
from census.schema import config_bags_schema, schema_from

__all__ = [
    "SHAPES",
    "Census",
    "DynamicRead",
    "Read",
    "RecordNames",
    "Shape",
    "Taker",
    "Write",
    "as_json",
    "as_table",
    "census_of",
    "census_of_source",
    "config_bags_schema",
    "counts_per_file",
    "ratchet_differences",
    "read_baseline",
    "schema_from",
    "totals",
    "write_baseline",
]
