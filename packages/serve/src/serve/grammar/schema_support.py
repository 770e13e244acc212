"""Which JSON-schema keywords the grammar engine enforces, and the first one a schema uses that it
does not.

xgrammar compiles every schema it can parse, but it leaves some keywords out of the grammar,
without a word or with only a warning on stderr: a schema with `not`, `uniqueItems`,
`if`/`then`/`else`, `dependentRequired`, `dependentSchemas`, more than one `allOf` branch, a
`multipleOf` on numbers or beside a range, a length beside a `format` or `pattern`, a lookaround
in a `pattern`, or an unknown `format` compiles into a grammar that accepts outputs the schema
rejects. Each was checked against xgrammar 0.2.9 (a string the keyword forbids, accepted by the
compiled grammar, or the engine's own "ignoring" warning). Such a schema is
refused, naming the keyword and where it is, rather than served with a constraint it does not hold.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

# keyword -> what the engine would leave out of the grammar
UNENFORCED_KEYWORDS: Mapping[str, str] = {
    "not": "a negated subschema",
    "uniqueItems": "unique array items",
    "if": "conditional subschemas",
    "then": "conditional subschemas",
    "else": "conditional subschemas",
    "dependentRequired": "properties required by another's presence",
    "dependentSchemas": "subschemas applied by a property's presence",
    "dependencies": "properties required by another's presence",
}

ENFORCED_FORMATS = frozenset(
    {
        "email",
        "date",
        "time",
        "date-time",
        "duration",
        "ipv4",
        "ipv6",
        "hostname",
        "uuid",
        "uri",
        "uri-reference",
        "uri-template",
        "json-pointer",
        "relative-json-pointer",
    }
)

_RANGE = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")
_LOOKAROUND = re.compile(r"\(\?<?[=!]")

# Keywords whose value maps names to subschemas, holds one subschema, or lists subschemas.
_NAMED_SUBSCHEMAS = ("properties", "patternProperties", "$defs", "definitions")
_ONE_SUBSCHEMA = (
    "items",
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
    "contains",
)
_LISTED_SUBSCHEMAS = ("anyOf", "oneOf", "allOf", "prefixItems")


def unenforced_feature_of(schema: Any) -> str | None:
    """The first keyword of `schema` the grammar engine would not enforce, as a sentence naming
    it and its JSON pointer; None when every keyword it uses is enforced."""
    for pointer, node in _subschemas(schema, "#"):
        for keyword, what in UNENFORCED_KEYWORDS.items():
            if keyword in node:
                return f"'{keyword}' at {pointer} ({what}) is not enforced by the grammar engine"
        if isinstance(node.get("allOf"), list) and len(node["allOf"]) > 1:
            return f"'allOf' with {len(node['allOf'])} branches at {pointer} is not enforced (only one branch is)"
        multiple = node.get("multipleOf")
        if multiple is not None and (node.get("type") != "integer" or not isinstance(multiple, int)):
            return f"'multipleOf' at {pointer} is enforced only on integers by integers, got {multiple!r}"
        if multiple is not None and any(bound in node for bound in _RANGE):
            return f"'multipleOf' with a range at {pointer} is not enforced (the engine drops the multipleOf)"
        for length in ("minLength", "maxLength"):
            for beside in ("format", "pattern"):
                if length in node and beside in node:
                    return f"'{length}' beside '{beside}' at {pointer} is not enforced (the engine drops the length)"
        pattern = node.get("pattern")
        if isinstance(pattern, str) and _LOOKAROUND.search(pattern):
            return f"lookaround in 'pattern' at {pointer} is not enforced by the grammar engine"
        form = node.get("format")
        if isinstance(form, str) and form not in ENFORCED_FORMATS:
            return (
                f"'format': {form!r} at {pointer} is not enforced by the grammar engine; enforced formats: "
                f"{', '.join(sorted(ENFORCED_FORMATS))}"
            )
    return None


def _subschemas(schema: Any, pointer: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every schema object in `schema` (itself first), with its JSON pointer."""
    if not isinstance(schema, dict):
        return
    yield pointer, schema
    for keyword in _NAMED_SUBSCHEMAS:
        named = schema.get(keyword)
        if isinstance(named, dict):
            for name, sub in named.items():
                yield from _subschemas(sub, f"{pointer}/{keyword}/{_escaped(name)}")
    for keyword in _ONE_SUBSCHEMA:
        yield from _subschemas(schema.get(keyword), f"{pointer}/{keyword}")
    for keyword in _LISTED_SUBSCHEMAS:
        listed = schema.get(keyword)
        if isinstance(listed, list):
            for i, sub in enumerate(listed):
                yield from _subschemas(sub, f"{pointer}/{keyword}/{i}")


def _escaped(name: str) -> str:
    """A property name as a JSON-pointer token (RFC 6901)."""
    return name.replace("~", "~0").replace("/", "~1")
