"""Parsing any Python 3.8-3.13 source with this interpreter's `ast`.

Python 3.11's parser takes everything up to 3.11. Sources that use the 3.12 syntax it lacks
(PEP 695 type parameters and `type` aliases, PEP 701 f-strings that reuse their quote inside a
replacement field) are rewritten first by `downgrade`, keeping every line where it was, so the
census still names the right lines. A file that parses neither way is skipped with a warning.
"""

from __future__ import annotations

import ast
import sys
import warnings

from census.downgrade import downgraded


class UnparseableWarning(UserWarning):
    """A file the census skipped because it is not valid Python 3.8-3.13."""


def parsed_module(source: str, path: str) -> ast.Module | None:
    """The module's AST, or None (with an UnparseableWarning naming the file and line). A
    leading byte-order mark (text decoded as plain UTF-8 keeps it) is not part of the code."""
    source = source.removeprefix("\ufeff")
    try:
        return ast.parse(source, filename=path)
    except SyntaxError as first:
        error = first
    except ValueError as err:  # null bytes
        warnings.warn(f"{path}: skipped, not Python source: {err}", UnparseableWarning, stacklevel=2)
        return None
    if sys.version_info < (3, 12):
        try:
            return ast.parse(downgraded(source), filename=path)
        except SyntaxError:
            pass
    warnings.warn(
        f"{path}:{error.lineno}: skipped, not valid Python 3.8-3.13: {error.msg}", UnparseableWarning, stacklevel=2
    )
    return None
