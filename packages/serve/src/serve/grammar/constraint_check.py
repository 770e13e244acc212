"""The check an output constraint passes before its request is queued: the grammar engine parses
it (no tokenizer needed), and a JSON schema uses only keywords the engine enforces."""

from __future__ import annotations

import functools
import json

from runtime_scheduler import OutputConstraint
from serve.grammar.schema_support import unenforced_feature_of
from serve.grammar.xgrammar_engine import grammar_of

CHECKED_CONSTRAINTS = 256  # answers kept: clients send the same few schemas again and again


@functools.lru_cache(maxsize=CHECKED_CONSTRAINTS)
def constraint_refusal(constraint: OutputConstraint) -> str | None:
    """Why `constraint` cannot be served (the compiler's own message, or the schema keyword the
    engine would not enforce); None when it can."""
    if constraint.kind == "json_schema":
        feature = unenforced_feature_of(json.loads(constraint.text))
        if feature is not None:
            return feature
    try:
        grammar_of(constraint)
    except ValueError as err:
        return str(err)
    return None
