"""Which part of a value each name of a target takes, where the source shows it: a tuple or list
target (a starred name too) against a tuple or list display, and what one pass of a `for` over a
display binds. Where the source does not show it, a name takes `element_of(value)`: something
of the value the census cannot name."""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from typing import TypeVar

Target = TypeVar("Target")


def _display(
    value: ast.expr | None, kinds: tuple[type[ast.Tuple | ast.List | ast.Set], ...] = (ast.Tuple, ast.List)
) -> list[ast.expr] | None:
    """The elements of a display of one of `kinds` without `*x` in it, else None."""
    if isinstance(value, kinds) and not any(isinstance(e, ast.Starred) for e in value.elts):
        return value.elts
    return None


def paired(
    targets: Sequence[Target], starred: Callable[[Target], bool], value: ast.expr | None
) -> list[ast.expr] | None:
    """The value each of `targets` takes from a tuple or list display, or None when `value` is
    not one that fits. The starred target (`first, *rest = ...`, `case [a, *rest]`) takes the
    middle of the display, as the list it is."""
    values = _display(value)
    if values is None:
        return None
    star = next((i for i, t in enumerate(targets) if starred(t)), None)
    if star is None:
        return list(values) if len(values) == len(targets) else None
    after = len(targets) - star - 1
    if len(values) < len(targets) - 1:
        return None
    middle = ast.List(elts=values[star : len(values) - after], ctx=ast.Load())
    return [*values[:star], middle, *values[len(values) - after :]]


def element_of(value: ast.expr) -> ast.expr:
    """Some part of `value` the census cannot name (`value[...]`): it holds the record exactly
    when `value` does."""
    return ast.Subscript(value=value, slice=ast.Constant(value=...), ctx=ast.Load())


def _either(values: Sequence[ast.expr]) -> ast.expr:
    """What a name takes that is bound to each of `values` in turn: `a or b or ...`, kept apart
    position by position when every value is a display of the same length (so that
    `for a, sa in [(1, server_args), (2, other)]` gives `sa` the record and `a` not)."""
    if len(values) == 1:
        return values[0]
    rows = [_display(v) for v in values]
    if all(row is not None for row in rows) and len({len(row) for row in rows if row is not None}) == 1:
        columns = zip(*(row for row in rows if row is not None), strict=True)
        return ast.Tuple(elts=[_either(column) for column in columns], ctx=ast.Load())
    return ast.BoolOp(op=ast.Or(), values=list(values))


def each_iteration(iterable: ast.expr) -> ast.expr:
    """What the target of `for target in iterable` takes: over a tuple, list or set display, any
    of its elements; over anything else, an element the census cannot name."""
    elements = _display(iterable, (ast.Tuple, ast.List, ast.Set))
    if elements is None:
        return element_of(iterable)
    return _either(elements) if elements else ast.Constant(value=None)
