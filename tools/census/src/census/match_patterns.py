"""What a `match` case does with its subject, step by step, for the module scan to follow: the
names it captures and the value each takes, the members a class pattern reads off the subject,
and the expressions it evaluates (value patterns, mapping keys).

A class pattern that names the record type (`case ServerArgs(page_size=n)`) proves its subject
is the record, whatever the subject was; a sequence pattern against a tuple or list display
pairs element by element; anything else takes a part of the subject the census cannot name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from census.annotations import names_a_type
from census.unpacking import element_of, paired


@dataclass(frozen=True, slots=True)
class Capture:
    """`case x`, `case P as x`, `case [x, *rest]`, `case {**rest}`: `name` takes `value`."""

    name: str
    value: ast.expr
    pattern: ast.pattern


@dataclass(frozen=True, slots=True)
class Members:
    """`case C(a, b=x)`: a class pattern reads the attributes `named` off `subject` by keyword,
    and `positional` more whose names the class's `__match_args__` holds."""

    pattern: ast.MatchClass
    subject: ast.expr
    named: tuple[str, ...]
    positional: int


@dataclass(frozen=True, slots=True)
class Evaluated:
    """An expression a pattern evaluates as written (`case Color.RED`, a mapping key)."""

    expr: ast.expr


Step = Capture | Members | Evaluated
# What a positional class sub-pattern takes: a member named by `__match_args__`, not the record.
MATCH_ARGS_MEMBER = ast.Constant(value=None)


def _refined(pattern: ast.pattern | None, subject: ast.expr, types: frozenset[str]) -> ast.expr:
    """The subject as `pattern` proves it: a class pattern naming the record type makes it the
    record (a call of that type, which the census reads as the record)."""
    if isinstance(pattern, ast.MatchClass) and names_a_type(pattern.cls, types):
        return ast.Call(func=pattern.cls, args=[], keywords=[])
    return subject


def steps(pattern: ast.pattern, subject: ast.expr, types: frozenset[str]) -> Iterator[Step]:
    """The steps of matching `subject` against `pattern`, in source order."""
    if isinstance(pattern, ast.MatchAs):
        if pattern.pattern is not None:
            yield from steps(pattern.pattern, subject, types)
        if pattern.name is not None:
            yield Capture(pattern.name, _refined(pattern.pattern, subject, types), pattern)
    elif isinstance(pattern, ast.MatchOr):
        for alternative in pattern.patterns:
            yield from steps(alternative, subject, types)
    elif isinstance(pattern, ast.MatchValue):
        yield Evaluated(pattern.value)
    elif isinstance(pattern, ast.MatchSequence):
        values = paired(pattern.patterns, lambda p: isinstance(p, ast.MatchStar), subject)
        for i, sub in enumerate(pattern.patterns):
            value = element_of(subject) if values is None else values[i]
            if not isinstance(sub, ast.MatchStar):
                yield from steps(sub, value, types)
            elif sub.name is not None:
                yield Capture(sub.name, value, sub)
    elif isinstance(pattern, ast.MatchMapping):
        for key, sub in zip(pattern.keys, pattern.patterns, strict=True):
            yield Evaluated(key)
            yield from steps(sub, ast.Subscript(value=subject, slice=key, ctx=ast.Load()), types)
        if pattern.rest is not None:
            yield Capture(pattern.rest, element_of(subject), pattern)
    elif isinstance(pattern, ast.MatchClass):
        subject = _refined(pattern, subject, types)
        yield Members(pattern, subject, tuple(pattern.kwd_attrs), len(pattern.patterns))
        for sub in pattern.patterns:
            yield from steps(sub, MATCH_ARGS_MEMBER, types)
        for attr, sub in zip(pattern.kwd_attrs, pattern.kwd_patterns, strict=True):
            yield from steps(sub, ast.Attribute(value=subject, attr=attr, ctx=ast.Load()), types)
