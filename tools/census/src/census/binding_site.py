"""How the census shows what it reports: an expression as written, and a binding it cannot
follow (its form, `assignment`, `for`, `match`..., and the binding as written)."""

from __future__ import annotations

import ast
from dataclasses import dataclass

# How a dynamic binding is shown: `{node}` is the binding's node as written, `{value}` its value.
SHOWN = {
    "for": "for {node} in {value}",
    "comprehension": "for {node} in {value}",
    "with": "with {value} as {node}",
    "match": "case {node}",
    "parameter default": "{node}={value}",
}


def cut(text: str) -> str:
    """`text`, cut at 120 characters."""
    return text if len(text) <= 120 else text[:117] + "..."


def shown(node: ast.expr) -> str:
    """The expression as written, cut at 120 characters."""
    return cut(ast.unparse(node))


@dataclass
class Site:
    """One binding, for a dynamic finding: its form (`assignment`, `for`, ...), the node shown
    (and its line), the value bound; reported once however many of its names it concerns."""

    form: str
    node: ast.expr | ast.stmt | ast.arg | ast.pattern
    value: ast.expr | None = None
    reported: bool = False

    def shown(self) -> str:
        """The binding as written (`first, *rest = (x, server_args)`, `for sa in pairs`)."""
        template = SHOWN.get(self.form, "{node}")
        value = "" if self.value is None else ast.unparse(self.value)
        node = ast.unparse(self.node)
        if isinstance(self.node, ast.Tuple) and self.node.elts:
            node = node[1:-1]  # `for a, b in x` as written, not `for (a, b) in x`
        return cut(template.format(node=node, value=value))
