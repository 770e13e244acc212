"""The census of one module: walks its AST in source order, following the record through every way
Python binds a name, and through attributes a class (or a base class) parks it on, and records
every read, write, dynamic finding, record-taking function, record-parking class and copy of a
bag value into an instance attribute.

The record is any name or attribute spelled like one of `RecordNames.names` (`server_args`,
`self.server_args`, `self.model_runner.server_args`), any parameter or variable annotated with
one of `RecordNames.types` (`ServerArgs`), a call of one of those types, and anything bound from
those (see `record_values`): by assignment (plain, annotated, to a tuple or list target, starred
too), `for` and comprehension targets, `with ... as`, the walrus, a parameter's default, a
`match` capture, across `global` and `nonlocal`; and `self.args = server_args` in one method,
read as `self.args.page_size` in any other, and in the methods of subclasses when the class graph
hands the parking down (`inherited`). An import, a `def`, a `class` and `except ... as` bind
something else: they end an alias. A binding that may hold the record where the census cannot
name which part does is reported as dynamic, with its form.

A copy is an assignment (plain, annotated, to a tuple target, or a literal `setattr`) of a bag
value (see `bag_values`) to an attribute of the instance (`self.x`, `self.a.b`, `self.d[k]`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from typing import Any

from census.bag_names import NO_BAGS, BagNames
from census.binding_forms import BindingForms
from census.binding_site import Site, shown
from census.findings import ClassFacts, ModuleFindings
from census.record_names import RecordNames
from census.record_values import literal_member
from census.scope import NO_PARKING, Scope
from census.unpacking import each_iteration

DYNAMIC_CALLS = frozenset({"vars", "asdict"})
NAMED_MEMBER_CALLS = frozenset({"getattr", "hasattr"})
MAX_PARKING_ROUNDS = 8
# A `global` bound to the record in one function makes it the record in the functions before it
# too: the module is scanned again with it; each round can only add names.
MAX_GLOBAL_ROUNDS = 4
# Nodes with nothing below them that could reach the record: skipped without a lookup.
CHILDLESS: frozenset[type[ast.AST]] = frozenset(
    {ast.Name, ast.Constant, ast.Load, ast.Store, ast.Del, ast.Pass, ast.Break, ast.Continue}
    | {
        cls
        for cls in vars(ast).values()
        if isinstance(cls, type) and issubclass(cls, (ast.operator, ast.unaryop, ast.cmpop, ast.boolop))
    }
)


class ModuleScanner(BindingForms):
    """Scans one parsed module; `findings` holds the result. `inherited` maps a class's
    qualified name to the attributes its base classes park the record on (the class graph's
    answer; empty: only parking within a class is followed)."""

    def __init__(
        self,
        path: str,
        names: RecordNames,
        bag_of: Mapping[str, str],
        bags: BagNames = NO_BAGS,
        inherited: Mapping[str, frozenset[str]] | None = None,
    ) -> None:
        super().__init__(path, names, bag_of, bags, inherited)
        self._dispatch: dict[type[ast.AST], Callable[[Any, Scope], None]] = {
            ast.Attribute: self._attribute,
            ast.Call: self._call,
            ast.Assign: self._assign,
            ast.AnnAssign: self._ann_assign,
            ast.AugAssign: self._aug_assign,
            ast.NamedExpr: self._named_expr,
            ast.With: self._with,
            ast.AsyncWith: self._with,
            ast.If: self._if,
            ast.While: self._while,
            ast.For: self._for,
            ast.AsyncFor: self._for,
            ast.Try: self._try,
            ast.TryStar: self._try,
            ast.ListComp: self._comprehension,
            ast.SetComp: self._comprehension,
            ast.GeneratorExp: self._comprehension,
            ast.DictComp: self._comprehension,
            ast.ExceptHandler: self._except,
            ast.Match: self._match,
            ast.Global: self._global,
            ast.Nonlocal: self._nonlocal,
            ast.Delete: self._delete,
            ast.FunctionDef: self._function,
            ast.AsyncFunctionDef: self._function,
            ast.Lambda: self._lambda,
            ast.ClassDef: self._class,
            ast.Import: self._import,
            ast.ImportFrom: self._import_from,
        }

    def scan(self, tree: ast.Module) -> ModuleFindings:
        """Scan the whole module (again, with the record's `global` names known from the start,
        when a function binds one)."""
        for _ in range(MAX_GLOBAL_ROUNDS):
            seeded = (set(self._global_aliases), set(self._global_holders))
            self.findings = ModuleFindings()
            scope = Scope.module()
            scope.env.update(dict.fromkeys(seeded[0], "alias"))
            scope.holders |= seeded[1]
            for stmt in tree.body:
                self._visit(stmt, scope)
            if (self._global_aliases, self._global_holders) == seeded:
                break
        return self.findings

    # -- walking

    def _visit(self, node: ast.AST, scope: Scope) -> None:
        kind = type(node)
        if kind in CHILDLESS:
            return
        handler = self._dispatch.get(kind)
        if handler is not None:
            handler(node, scope)
            return
        for field in node._fields:  # ast.iter_child_nodes without its generator (the hot loop)
            value = getattr(node, field, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        self._visit(item, scope)
            elif isinstance(value, ast.AST):
                self._visit(value, scope)

    def _attribute(self, node: ast.Attribute, scope: Scope) -> None:
        shape = self.values.shape(node.value, scope)
        if shape is not None and type(node.ctx) is ast.Load:
            if node.attr == "__dict__":
                self._dynamic(node.lineno, scope, "__dict__", shown(node))
            else:
                self._read(node.lineno, scope, node.attr, shape)
        self._visit(node.value, scope)

    def _call(self, node: ast.Call, scope: Scope) -> None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        args = node.args
        if name is not None and args and self.values.shape(args[0], scope) is not None:
            literal = literal_member(node)
            if name in NAMED_MEMBER_CALLS and len(args) > 1:
                if literal is not None:
                    self._read(node.lineno, scope, literal, "getattr")
                else:
                    self._dynamic(node.lineno, scope, name, shown(node))
            elif name == "setattr" and len(args) > 1:
                if literal is not None:
                    self._write(node, scope, literal)
                else:
                    self._dynamic(node.lineno, scope, name, shown(node))
            elif name in DYNAMIC_CALLS:
                self._dynamic(node.lineno, scope, name, shown(node))
        if name == "setattr" and len(args) == 3:
            self._setattr_copy(node, scope)
        self._visit(func, scope)
        for arg in args:
            self._visit(arg, scope)
        for keyword in node.keywords:
            self._visit(keyword.value, scope)

    def _setattr_copy(self, node: ast.Call, scope: Scope) -> None:
        """`setattr(self, "x", get_schedule().page_size)`: a copy like `self.x = ...`."""
        owner, member, value = node.args
        if not (
            isinstance(owner, ast.Name)
            and owner.id == scope.self_name
            and isinstance(member, ast.Constant)
            and isinstance(member.value, str)
        ):
            return
        held = self.bag_values.of(value, scope.bags)
        if held is not None:
            self._copy(node, f"{owner.id}.{member.value}", value, held, scope)

    def _delete(self, node: ast.Delete, scope: Scope) -> None:
        for target in node.targets:
            if type(target) is ast.Attribute and self.values.shape(target.value, scope) is not None:
                self._write(target, scope, target.attr)
            else:
                self._visit(target, scope)

    # -- branches: each walked from the same start; after them a name holds what any left it

    def _branches(self, branches: list[list[ast.stmt]], scope: Scope) -> None:
        start = scope.bindings()
        ends = []
        for branch in branches:
            scope.restore(start)
            self._walk(branch, scope)
            ends.append(scope.bindings())
        scope.after(ends)

    def _if(self, node: ast.If, scope: Scope) -> None:
        self._visit(node.test, scope)
        self._branches([node.body, node.orelse], scope)

    def _while(self, node: ast.While, scope: Scope) -> None:
        self._visit(node.test, scope)
        self._branches([node.body, []], scope)
        self._walk(node.orelse, scope)

    def _for(self, node: ast.For | ast.AsyncFor, scope: Scope) -> None:
        """The target is bound only when the loop runs: after it, the names hold what they held
        before or what the body left."""
        self._visit(node.iter, scope)
        start = scope.bindings()
        self._bind(node.target, each_iteration(node.iter), scope, Site("for", node.target, node.iter), None)
        self._walk(node.body, scope)
        scope.join(start)
        self._walk(node.orelse, scope)

    def _try(self, node: ast.Try | ast.TryStar, scope: Scope) -> None:
        """A handler starts anywhere in the body: from what the names held before it or after it."""
        start = scope.bindings()
        self._walk(node.body, scope)
        self._walk(node.orelse, scope)
        done = scope.bindings()
        ends = [done]
        for handler in node.handlers:
            scope.after([start, done])
            self._visit(handler, scope)
            ends.append(scope.bindings())
        scope.after(ends)
        self._walk(node.finalbody, scope)

    def _match(self, node: ast.Match, scope: Scope) -> None:
        """Each case from the subject; after them, what any case (or none) left."""
        self._visit(node.subject, scope)
        start = scope.bindings()
        ends = [start]
        for case in node.cases:
            scope.restore(start)
            self._pattern(case.pattern, node.subject, scope)
            if case.guard is not None:
                self._visit(case.guard, scope)
            self._walk(case.body, scope)
            ends.append(scope.bindings())
        scope.after(ends)

    # -- scopes

    def _function(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef, scope: Scope, *, self_name: str | None = None
    ) -> None:
        for decorator in node.decorator_list:
            self._visit(decorator, scope)
        if node.returns is not None:
            self._visit(node.returns, scope)
        inner = scope.function(scope.child(node.name), self_name or scope.self_name)
        self._parameters(node.args, scope, inner)
        self._walk(node.body, inner)
        self._unbind(node.name, scope)

    def _lambda(self, node: ast.Lambda, scope: Scope) -> None:
        inner = scope.function(scope.child("<lambda>"), scope.self_name)
        self._parameters(node.args, scope, inner)
        self._visit(node.body, inner)

    def _class(self, node: ast.ClassDef, scope: Scope) -> None:
        for expr in (*node.decorator_list, *node.bases, *(k.value for k in node.keywords)):
            self._visit(expr, scope)
        qualname = scope.child(node.name)
        body = scope.class_body(qualname, self.inherited.get(qualname, NO_PARKING))
        methods = [s for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
        # Parking is found before counting: a method may read self.args that a later one parks.
        emit, self._emit = self._emit, False
        for _ in range(MAX_PARKING_ROUNDS):
            before = len(body.parked)
            for method in methods:
                self._function(method, body, self_name=_self_name(method))
            if len(body.parked) == before:
                break
        self._emit = emit
        bases = (_dotted(b.value if isinstance(b, ast.Subscript) else b) for b in node.bases)
        self.findings.classes[qualname] = ClassFacts(tuple(b for b in bases if b is not None), frozenset(body.parked))
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._function(stmt, body, self_name=_self_name(stmt))
            else:
                self._visit(stmt, body)
        self._unbind(node.name, scope)

    # -- imports: for the class graph and for renamed accessors; they never bind the record

    def _import(self, node: ast.Import, scope: Scope) -> None:
        for alias in node.names:
            if alias.asname is not None:
                self.findings.imports[alias.asname] = (0, alias.name)
                self._unbind(alias.asname, scope, shadow=True)
            else:
                head = alias.name.partition(".")[0]
                self.findings.imports[head] = (0, head)
                self._unbind(head, scope, shadow=True)

    def _import_from(self, node: ast.ImportFrom, scope: Scope) -> None:
        """`import m as server_args` binds a module; `from m import server_args` a module or any
        object of m, a record instance too: the census cannot tell, so it reports it."""
        for alias in node.names:
            if alias.name == "*":
                continue
            bound = alias.asname or alias.name
            self.findings.imports[bound] = (node.level, f"{node.module}.{alias.name}" if node.module else alias.name)
            self.bag_values.imported(alias.name, bound)
            self._unbind(bound, scope, shadow=True)
            if bound in self.names:
                self._unresolved(Site("import", node), scope)


def _dotted(node: ast.expr) -> str | None:
    """`Base`, `mod.Base`, `pkg.mod.Base`; None for any other expression."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _self_name(method: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The instance parameter of a method; None for a staticmethod or a method without one."""
    if any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in method.decorator_list):
        return None
    positional = [*method.args.posonlyargs, *method.args.args]
    return positional[0].arg if positional else None
