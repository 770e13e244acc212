"""Which expressions hold a bag value, for the count of copies into instance attributes.

A bag value is what a bag accessor or a derived accessor answers (`get_schedule()`,
`chunk_size()`, `config_bags.server.get_exec()`), a parameter annotated with a bag type, a local bound
to one of those (tuple unpacking and `:=` too), a member read off one
(`get_exec().kernel.attention_backend`), and what keeps such a value as it is: an element
(`sizes[0]`), either branch of `a if c else b`, an operand of `or`/`and`, a tuple or list that
holds one, and the conversions and picks of the builtins in VALUE_KEEPING_CALLS. Arithmetic,
comparisons, f-strings and other calls make a new value: they are not followed.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass

from census.annotations import names_a_type
from census.bag_names import BagNames

VALUE_KEEPING_CALLS = frozenset({"int", "float", "str", "bool", "tuple", "list", "set", "frozenset", "min", "max"})


@dataclass(frozen=True, slots=True)
class BagValue:
    """A bag value: `leaf` is the last member read off a bag (None: a bag itself, or what a
    derived accessor answers); `is_bag` says whether a further member is read off a bag."""

    leaf: str | None
    is_bag: bool


WHOLE_BAG = BagValue(None, True)
DERIVED = BagValue(None, False)


class BagValues:
    """Answers which expressions of one module hold a bag value."""

    def __init__(self, names: BagNames, bag_of: Mapping[str, str]) -> None:
        self.accessors = set(names.accessors)
        self.derived = set(names.derived)
        self.types = names.types
        self.bag_of = bag_of

    def imported(self, name: str, bound: str) -> None:
        """`from config_bags import get_schedule as gs`: `gs()` answers a bag too."""
        if name in self.accessors:
            self.accessors.add(bound)
        elif name in self.derived:
            self.derived.add(bound)

    def is_bag_type(self, annotation: ast.expr | None) -> bool:
        """Whether an annotation names a bag type (`ScheduleBag`, `Optional["cb.ScheduleBag"]`)."""
        return names_a_type(annotation, self.types)

    def of(self, node: ast.AST | None, env: Mapping[str, BagValue]) -> BagValue | None:
        """The bag value `node` holds, or None."""
        if isinstance(node, ast.Name):
            return env.get(node.id)
        if isinstance(node, ast.Attribute):
            owner = self.of(node.value, env)
            if owner is None or not owner.is_bag:
                return owner
            return BagValue(node.attr, node.attr not in self.bag_of)
        if isinstance(node, ast.Call):
            return self._call(node, env)
        if isinstance(node, ast.Subscript):
            held = self.of(node.value, env)
            return None if held is None else BagValue(held.leaf, False)
        if isinstance(node, ast.IfExp):
            return self.of(node.body, env) or self.of(node.orelse, env)
        if isinstance(node, (ast.BoolOp, ast.Tuple, ast.List, ast.Set)):
            parts = node.values if isinstance(node, ast.BoolOp) else node.elts
            return next((held for held in (self.of(part, env) for part in parts) if held is not None), None)
        if isinstance(node, (ast.NamedExpr, ast.Starred)):
            return self.of(node.value, env)
        return None

    def _call(self, node: ast.Call, env: Mapping[str, BagValue]) -> BagValue | None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name is None:
            return None
        if name in self.accessors:
            return WHOLE_BAG
        if name in self.derived:
            return DERIVED
        if name in VALUE_KEEPING_CALLS and isinstance(func, ast.Name):
            return next((held for held in (self.of(arg, env) for arg in node.args) if held is not None), None)
        return None
