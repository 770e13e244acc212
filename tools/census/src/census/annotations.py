"""Whether an annotation names one of a set of types: `ServerArgs`, `Optional[ServerArgs]`,
`mod.ServerArgs`, `"ServerArgs | None"`."""

from __future__ import annotations

import ast
import re

WORD = re.compile(r"[A-Za-z_]\w*")


def names_a_type(annotation: ast.expr | None, types: frozenset[str]) -> bool:
    """Whether `annotation` spells any of `types`, as a name, an attribute or a word of a string."""
    if annotation is None or not types:
        return False
    for sub in ast.walk(annotation):
        if isinstance(sub, ast.Name) and sub.id in types:
            return True
        if isinstance(sub, ast.Attribute) and sub.attr in types:
            return True
        if (
            isinstance(sub, ast.Constant)
            and isinstance(sub.value, str)
            and not types.isdisjoint(WORD.findall(sub.value))
        ):
            return True
    return False
