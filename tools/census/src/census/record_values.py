"""Which expressions are the record, and which hold it where the census cannot name it.

`shape` answers how an expression reaches the record: a record name or an attribute spelled like
one (`server_args`, `x.server_args`), a local bound to it, an attribute its class (or a base
class) parks it on, a call of the record type, a literal `getattr(x, "server_args")`, and either
side of `a or b`, `a and b`, `a if c else b`, `(n := a)`: each may be the record, so reads
through it are followed.

`holds` answers whether an expression's value holds the record inside something else: a tuple,
list, set or dict display with the record (or a holder) in it, an element or slice of a holder
(`pairs[0]`), a comprehension whose elements are the record, a builtin that keeps the elements
of what it is handed (`list(x)`, `zip(a, b)`, `enumerate(x)`, `next(x)`), and a name bound to any
of those. A binding of such a value may bind the record without the census knowing which part
does: the module scan reports it as dynamic.
"""

from __future__ import annotations

import ast

from census.findings import Shape
from census.scope import Scope

# Builtins whose answer holds the elements (or keyword values) of what they are handed.
ELEMENT_KEEPING_CALLS = frozenset(
    {"list", "tuple", "set", "frozenset", "dict", "iter", "next", "reversed", "sorted", "enumerate", "zip", "filter"}
)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


class RecordValues:
    """Answers which expressions of one module are the record or hold it. `holding` is filled by
    the module scan as it walks each comprehension: whether its elements are the record."""

    def __init__(self, names: frozenset[str], types: frozenset[str]) -> None:
        self.names = names
        self.types = types
        self.holding: set[ast.AST] = set()

    def shape(self, node: ast.AST | None, scope: Scope) -> Shape | None:
        """How `node` reaches the record, or None when it is not the record."""
        if isinstance(node, ast.Name):
            if node.id in self.names:
                return None if node.id in scope.shadowed else "direct"
            return scope.env.get(node.id)
        if isinstance(node, ast.Attribute):
            if node.attr in self.names:
                return "direct"
            owner = node.value
            attr = node.attr
            if (
                (attr in scope.parked or attr in scope.inherited)
                and isinstance(owner, ast.Name)
                and owner.id == scope.self_name
            ):
                return "parked" if attr in scope.parked else "inherited"
            return None
        if isinstance(node, ast.NamedExpr):
            return self.shape(node.value, scope)
        if isinstance(node, ast.BoolOp):
            return next((s for s in (self.shape(v, scope) for v in node.values) if s is not None), None)
        if isinstance(node, ast.IfExp):
            return self.shape(node.body, scope) or self.shape(node.orelse, scope)
        if isinstance(node, ast.Call):
            return self._call_shape(node, scope)
        return None

    def _call_shape(self, node: ast.Call, scope: Scope) -> Shape | None:
        """`ServerArgs(...)` constructs the record; `getattr(x, "server_args")` is `x.server_args`."""
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name in self.types:
            return "direct"
        member = literal_member(node) if name == "getattr" and isinstance(func, ast.Name) else None
        if member is None:
            return None
        return self.shape(ast.Attribute(value=node.args[0], attr=member, ctx=ast.Load()), scope)

    def holds(self, node: ast.AST | None, scope: Scope) -> bool:
        """Whether `node`'s value holds the record (or may) in a part the census cannot name."""
        if isinstance(node, ast.Name):
            return node.id in scope.holders
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return any(self._element_holds(e, scope) for e in node.elts)
        if isinstance(node, ast.Dict):
            return any(
                self.holds(v, scope) if k is None else self._element_holds(k, scope) or self._element_holds(v, scope)
                for k, v in zip(node.keys, node.values, strict=True)
            )
        if isinstance(node, (ast.Subscript, ast.Starred, ast.NamedExpr)):
            return self.holds(node.value, scope)
        if isinstance(node, ast.BoolOp):
            return any(self.holds(v, scope) for v in node.values)
        if isinstance(node, ast.IfExp):
            return self.holds(node.body, scope) or self.holds(node.orelse, scope)
        if isinstance(node, COMPREHENSIONS):
            return node in self.holding
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ELEMENT_KEEPING_CALLS:
            return any(self.holds(a, scope) for a in node.args) or any(
                self._element_holds(k.value, scope) for k in node.keywords
            )
        return False

    def _element_holds(self, node: ast.expr, scope: Scope) -> bool:
        """Whether an element of a display (or a keyword value) makes it hold the record: the
        record itself or a holder; `*x` only when `x` holds it (unpacking the record itself
        spreads its members, not the record)."""
        if isinstance(node, ast.Starred):
            return self.holds(node.value, scope)
        return self.shape(node, scope) is not None or self.holds(node, scope)

    def is_or_holds(self, node: ast.AST | None, scope: Scope) -> bool:
        """Whether `node` is the record or holds it."""
        return self.shape(node, scope) is not None or self.holds(node, scope)


def literal_member(node: ast.Call) -> str | None:
    """The member a call names with a string literal second argument (`getattr(x, "page_size")`)."""
    if len(node.args) < 2:
        return None
    member = node.args[1]
    return member.value if isinstance(member, ast.Constant) and isinstance(member.value, str) else None
