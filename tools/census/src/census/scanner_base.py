"""The module scanner's state and how it emits findings: what the binding forms and the walk
share. `findings` collects one pass; the class pre-pass turns `_emit` off."""

from __future__ import annotations

import ast
from collections.abc import Mapping

from census.bag_names import BagNames
from census.bag_values import BagValue, BagValues
from census.binding_site import Site, shown
from census.findings import Copy, DynamicRead, ModuleFindings, Read, Shape, Write
from census.record_names import RecordNames
from census.record_values import RecordValues
from census.scope import Scope


class ScannerBase:
    """One module's scan state: the record's names and types, what answers record and bag
    values, what the class graph hands down (`inherited`), and the findings."""

    def __init__(
        self,
        path: str,
        names: RecordNames,
        bag_of: Mapping[str, str],
        bags: BagNames,
        inherited: Mapping[str, frozenset[str]] | None,
    ) -> None:
        self.path = path
        self.names = names.names
        self.types = names.types
        self.bag_of = bag_of
        self.values = RecordValues(names.names, names.types)
        self.bag_values = BagValues(bags, bag_of)
        self.inherited = inherited or {}
        self.findings = ModuleFindings()
        self._emit = True
        # The names a `global` binds to the record (or to a holder of it) in some function.
        self._global_aliases: set[str] = set()
        self._global_holders: set[str] = set()

    def _visit(self, node: ast.AST, scope: Scope) -> None:
        """Walk `node` and what is below it (the module scanner's dispatch)."""
        raise NotImplementedError

    def _walk(self, stmts: list[ast.stmt], scope: Scope) -> None:
        for stmt in stmts:
            self._visit(stmt, scope)

    def _on_instance(self, target: ast.expr, scope: Scope) -> bool:
        """Whether `target` is an attribute of the instance: `self.x`, `self.a.b`, `self.d[k]`."""
        through_attribute = False
        node = target
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            through_attribute = through_attribute or isinstance(node, ast.Attribute)
            node = node.value
        return through_attribute and isinstance(node, ast.Name) and node.id == scope.self_name

    # -- emitting

    def _read(self, line: int, scope: Scope, leaf: str, shape: Shape) -> None:
        if self._emit:
            self.findings.reads.append(Read(self.path, line, scope.qualname, leaf, self.bag_of.get(leaf), shape))

    def _write(self, node: ast.expr, scope: Scope, leaf: str) -> None:
        if self._emit:
            self.findings.writes.append(Write(self.path, node.lineno, scope.qualname, leaf, self.bag_of.get(leaf)))

    def _dynamic(self, line: int, scope: Scope, kind: str, expr: str) -> None:
        if self._emit:
            self.findings.dynamic.append(DynamicRead(self.path, line, scope.qualname, kind, expr))

    def _unresolved(self, site: Site, scope: Scope) -> None:
        """A binding that may hold the record where the census cannot name which part does."""
        if not site.reported:
            site.reported = True
            self._dynamic(site.node.lineno, scope, site.form, site.shown())

    def _copy(self, target: ast.expr, target_text: str, value: ast.expr, held: BagValue, scope: Scope) -> None:
        if self._emit:
            bag = self.bag_of.get(held.leaf) if held.leaf is not None else None
            self.findings.copies.append(
                Copy(self.path, target.lineno, scope.qualname, target_text, shown(value), held.leaf, bag)
            )
