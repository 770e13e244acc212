"""The schemas forced calls are constrained to: a named function's own parameters, and for
"required" an array of calls of the offered functions, each with its own schema (references to a
schema's `$defs` kept resolving), at least one, exactly one without parallel calls. Checked with
`jsonschema`, an independent validator, on outputs a model could write, and compiled by the
grammar engine."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from serve.grammar.xgrammar_engine import grammar_of
from serve.tool_calls.forced import named_constraint, required_constraint, required_schema

LOCATION = {
    "type": "object",
    "properties": {"place": {"$ref": "#/$defs/Place"}},
    "required": ["place"],
    "$defs": {"Place": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
}
COUNT = {
    "type": "object",
    "properties": {"place": {"$ref": "#/$defs/Place"}},
    "required": ["place"],
    "$defs": {"Place": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}},
}
EMPTY = {"type": "object", "properties": {}, "additionalProperties": False}
FUNCTIONS = [("locate", LOCATION), ("count", COUNT), ("ping", EMPTY)]

LOCATE = {"name": "locate", "arguments": {"place": {"city": "Paris"}}}
COUNT_3 = {"name": "count", "arguments": {"place": {"n": 3}}}
PING = {"name": "ping", "arguments": {}}


@pytest.mark.parametrize(
    ("output", "valid"),
    [
        ([LOCATE], True),
        ([COUNT_3, LOCATE, PING], True),
        ([], False),  # no call
        ([{"name": "locate", "arguments": {"place": {"n": 3}}}], False),  # the other function's Place
        ([{"name": "divide", "arguments": {}}], False),  # no such function
        ([{"name": "ping"}], False),  # no arguments
        ([{"name": "ping", "arguments": {"x": 1}}], False),  # against ping's schema
        ([{"name": "ping", "arguments": {}, "extra": 1}], False),
    ],
)
def test_required_calls_are_arrays_of_offered_calls_each_matching_its_schema(output: Any, valid: bool) -> None:
    """Reverse-verified: without the renaming of references, both functions' `Place` resolved to
    the root's `$defs/Place`, which does not exist, and jsonschema raised on every output."""
    schema = required_schema(FUNCTIONS, one=False)
    assert (not valid) == _refuses(schema, output)


def test_without_parallel_calls_exactly_one() -> None:
    assert not _refuses(required_schema(FUNCTIONS, one=True), [LOCATE])
    assert _refuses(required_schema(FUNCTIONS, one=True), [LOCATE, PING])


def test_the_grammar_engine_compiles_what_is_forced() -> None:
    for one in (True, False):
        grammar_of(required_constraint(FUNCTIONS, one))
    named = named_constraint(LOCATION)
    assert named.kind == "json_schema" and json.loads(named.text) == LOCATION
    grammar_of(named)


def _refuses(schema: dict[str, Any], output: Any) -> bool:
    try:
        jsonschema.validate(output, schema)
    except jsonschema.ValidationError:
        return True
    return False
