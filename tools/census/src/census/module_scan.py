"""The census of one module: walks its AST in source order, following the record through local
aliases and through attributes a class parks it on, and records every read, write, dynamic
read and record-taking function.

The record is any name or attribute spelled like one of `RecordNames.names` (`server_args`,
`self.server_args`, `self.model_runner.server_args`), any parameter or variable annotated with
one of `RecordNames.types` (`ServerArgs`), a call of one of those types, and anything bound
from those:
`sa = x.server_args` (also tuple unpacking, `:=` and `with ... as sa`, and aliases of aliases),
and `self.args = server_args` in one method, read as `self.args.page_size` in any other.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from census.findings import DynamicRead, ModuleFindings, Read, Shape, Taker, Write

DYNAMIC_CALLS = frozenset({"vars", "asdict"})
NAMED_MEMBER_CALLS = frozenset({"getattr", "hasattr"})
MAX_PARKING_ROUNDS = 8
# Nodes with nothing below them that could reach the record: skipped without a lookup.
CHILDLESS: frozenset[type[ast.AST]] = frozenset(
    {ast.Name, ast.Constant, ast.Load, ast.Store, ast.Del, ast.Pass, ast.Break, ast.Continue, ast.Import, ast.ImportFrom}
    | {cls for cls in vars(ast).values() if isinstance(cls, type) and issubclass(cls, (ast.operator, ast.unaryop, ast.cmpop, ast.boolop))}
)
WORD = re.compile(r"[A-Za-z_]\w*")


@dataclass(frozen=True)
class RecordNames:
    """How the record is spelled in the scanned code."""

    names: frozenset[str] = frozenset({"server_args"})
    types: frozenset[str] = frozenset({"ServerArgs"})


class _Scope:
    """A function (or module, or class body): its local record aliases and its class's parking."""

    __slots__ = ("qualname", "env", "self_name", "parked")

    def __init__(self, qualname: str, env: dict[str, Shape], self_name: str | None, parked: set[str]) -> None:
        self.qualname = qualname
        self.env = env
        self.self_name = self_name
        self.parked = parked

    def child(self, name: str) -> str:
        return name if self.qualname == "<module>" else f"{self.qualname}.{name}"


class ModuleScanner:
    """Scans one parsed module; `findings` holds the result."""

    def __init__(self, path: str, names: RecordNames, bag_of: Mapping[str, str]) -> None:
        self.path = path
        self.names = names.names
        self.types = names.types
        self.bag_of = bag_of
        self.findings = ModuleFindings()
        self._emit = True
        self._dispatch: dict[type[ast.AST], Callable[[Any, _Scope], None]] = {
            ast.Attribute: self._attribute,
            ast.Call: self._call,
            ast.Assign: self._assign,
            ast.AnnAssign: self._ann_assign,
            ast.AugAssign: self._aug_assign,
            ast.NamedExpr: self._named_expr,
            ast.With: self._with,
            ast.AsyncWith: self._with,
            ast.For: self._for,
            ast.AsyncFor: self._for,
            ast.comprehension: self._comprehension,
            ast.Delete: self._delete,
            ast.FunctionDef: self._function,
            ast.AsyncFunctionDef: self._function,
            ast.Lambda: self._lambda,
            ast.ClassDef: self._class,
        }

    def scan(self, tree: ast.Module) -> ModuleFindings:
        """Scan the whole module."""
        scope = _Scope("<module>", {}, None, set())
        for stmt in tree.body:
            self._visit(stmt, scope)
        return self.findings

    # -- the record and its shapes

    def _shape(self, node: ast.AST | None, scope: _Scope) -> Shape | None:
        """How `node` reaches the record, or None when it is not the record."""
        if isinstance(node, ast.Name):
            return "direct" if node.id in self.names else scope.env.get(node.id)
        if isinstance(node, ast.Attribute):
            if node.attr in self.names:
                return "direct"
            owner = node.value
            if node.attr in scope.parked and isinstance(owner, ast.Name) and owner.id == scope.self_name:
                return "parked"
            return None
        if isinstance(node, ast.NamedExpr):
            return self._shape(node.value, scope)
        if isinstance(node, ast.Call):  # constructing the record: `ServerArgs(...)`
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            return "direct" if name in self.types else None
        return None

    def _is_record_type(self, annotation: ast.expr | None) -> bool:
        if annotation is None:
            return False
        for sub in ast.walk(annotation):
            if isinstance(sub, ast.Name) and sub.id in self.types:
                return True
            if isinstance(sub, ast.Attribute) and sub.attr in self.types:
                return True
            if isinstance(sub, ast.Constant) and isinstance(sub.value, str) and not self.types.isdisjoint(WORD.findall(sub.value)):
                return True
        return False

    # -- emitting

    def _read(self, node: ast.expr, scope: _Scope, leaf: str, shape: Shape) -> None:
        if self._emit:
            self.findings.reads.append(Read(self.path, node.lineno, scope.qualname, leaf, self.bag_of.get(leaf), shape))

    def _write(self, node: ast.expr, scope: _Scope, leaf: str) -> None:
        if self._emit:
            self.findings.writes.append(Write(self.path, node.lineno, scope.qualname, leaf, self.bag_of.get(leaf)))

    def _dynamic(self, node: ast.expr, scope: _Scope, kind: str) -> None:
        if self._emit:
            text = ast.unparse(node)
            text = text if len(text) <= 120 else text[:117] + "..."
            self.findings.dynamic.append(DynamicRead(self.path, node.lineno, scope.qualname, kind, text))

    # -- walking

    def _visit(self, node: ast.AST, scope: _Scope) -> None:
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

    def _attribute(self, node: ast.Attribute, scope: _Scope) -> None:
        shape = self._shape(node.value, scope)
        if shape is not None and type(node.ctx) is ast.Load:
            if node.attr == "__dict__":
                self._dynamic(node, scope, "__dict__")
            else:
                self._read(node, scope, node.attr, shape)
        self._visit(node.value, scope)

    def _call(self, node: ast.Call, scope: _Scope) -> None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        args = node.args
        if name is not None and args and self._shape(args[0], scope) is not None:
            member = args[1] if len(args) > 1 else None
            literal = member.value if isinstance(member, ast.Constant) and isinstance(member.value, str) else None
            if name in NAMED_MEMBER_CALLS and member is not None:
                if literal is not None:
                    self._read(node, scope, literal, "getattr")
                else:
                    self._dynamic(node, scope, name)
            elif name == "setattr" and member is not None:
                if literal is not None:
                    self._write(node, scope, literal)
                else:
                    self._dynamic(node, scope, name)
            elif name in DYNAMIC_CALLS:
                self._dynamic(node, scope, name)
        self._visit(func, scope)
        for arg in args:
            self._visit(arg, scope)
        for keyword in node.keywords:
            self._visit(keyword.value, scope)

    # -- bindings

    def _bind(self, target: ast.AST, value: ast.AST | None, scope: _Scope) -> None:
        """Bind `target` to `value` (None: to something that is not the record)."""
        if isinstance(target, ast.Name):
            if self._shape(value, scope) is not None:
                scope.env[target.id] = "alias"
            else:
                scope.env.pop(target.id, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            elts = target.elts
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
            paired = values is not None and len(values) == len(elts) and not any(isinstance(e, ast.Starred) for e in elts)
            for i, elt in enumerate(elts):
                self._bind(elt, values[i] if paired and values is not None else None, scope)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, None, scope)
        elif isinstance(target, ast.Attribute):
            owner = target.value
            if self._shape(owner, scope) is not None:
                self._write(target, scope, target.attr)
            elif isinstance(owner, ast.Name) and owner.id == scope.self_name and self._shape(value, scope) is not None:
                scope.parked.add(target.attr)
            self._visit(owner, scope)
        else:
            self._visit(target, scope)

    def _assign(self, node: ast.Assign, scope: _Scope) -> None:
        self._visit(node.value, scope)
        for target in node.targets:
            self._bind(target, node.value, scope)

    def _ann_assign(self, node: ast.AnnAssign, scope: _Scope) -> None:
        if node.value is None:
            return
        self._visit(node.value, scope)
        if isinstance(node.target, ast.Name) and self._is_record_type(node.annotation):
            scope.env[node.target.id] = "alias"  # `sa: ServerArgs = make()`
        else:
            self._bind(node.target, node.value, scope)

    def _aug_assign(self, node: ast.AugAssign, scope: _Scope) -> None:
        self._visit(node.value, scope)
        self._bind(node.target, None, scope)

    def _named_expr(self, node: ast.NamedExpr, scope: _Scope) -> None:
        self._visit(node.value, scope)
        self._bind(node.target, node.value, scope)

    def _with(self, node: ast.With | ast.AsyncWith, scope: _Scope) -> None:
        for item in node.items:
            self._visit(item.context_expr, scope)
            if item.optional_vars is not None:
                self._bind(item.optional_vars, item.context_expr, scope)
        for stmt in node.body:
            self._visit(stmt, scope)

    def _for(self, node: ast.For | ast.AsyncFor, scope: _Scope) -> None:
        self._visit(node.iter, scope)
        self._bind(node.target, None, scope)
        for stmt in (*node.body, *node.orelse):
            self._visit(stmt, scope)

    def _comprehension(self, node: ast.comprehension, scope: _Scope) -> None:
        self._visit(node.iter, scope)
        self._bind(node.target, None, scope)
        for cond in node.ifs:
            self._visit(cond, scope)

    def _delete(self, node: ast.Delete, scope: _Scope) -> None:
        for target in node.targets:
            if type(target) is ast.Attribute and self._shape(target.value, scope) is not None:
                self._write(target, scope, target.attr)
            else:
                self._visit(target, scope)

    # -- scopes

    def _parameters(self, args: ast.arguments, scope: _Scope, qualname: str, inner: dict[str, Shape]) -> None:
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        every += [a for a in (args.vararg, args.kwarg) if a is not None]
        for arg in every:
            inner.pop(arg.arg, None)
            typed = self._is_record_type(arg.annotation)
            if typed:
                inner[arg.arg] = "direct"
            if (typed or arg.arg in self.names) and self._emit:
                self.findings.takers.append(Taker(self.path, arg.lineno, qualname, arg.arg))
            if arg.annotation is not None:
                self._visit(arg.annotation, scope)
        for default in (*args.defaults, *(d for d in args.kw_defaults if d is not None)):
            self._visit(default, scope)

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, scope: _Scope, *, self_name: str | None = None) -> None:
        for decorator in node.decorator_list:
            self._visit(decorator, scope)
        if node.returns is not None:
            self._visit(node.returns, scope)
        qualname = scope.child(node.name)
        env = dict(scope.env)
        self._parameters(node.args, scope, qualname, env)
        inner = _Scope(qualname, env, self_name or scope.self_name, scope.parked)
        for stmt in node.body:
            self._visit(stmt, inner)

    def _lambda(self, node: ast.Lambda, scope: _Scope) -> None:
        env = dict(scope.env)
        qualname = scope.child("<lambda>")
        self._parameters(node.args, scope, qualname, env)
        self._visit(node.body, _Scope(qualname, env, scope.self_name, scope.parked))

    def _class(self, node: ast.ClassDef, scope: _Scope) -> None:
        for expr in (*node.decorator_list, *node.bases, *(k.value for k in node.keywords)):
            self._visit(expr, scope)
        body = _Scope(scope.child(node.name), dict(scope.env), None, set())
        methods = [s for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
        # Parking is found before counting: a method may read self.args that a later one parks.
        emit, self._emit = self._emit, False
        for _ in range(MAX_PARKING_ROUNDS):
            before = len(body.parked)
            for method in methods:
                self._function(method, _Scope(body.qualname, dict(body.env), None, body.parked), self_name=_self_name(method))
            if len(body.parked) == before:
                break
        self._emit = emit
        for stmt in node.body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._function(stmt, body, self_name=_self_name(stmt))
            else:
                self._visit(stmt, body)


def _self_name(method: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """The instance parameter of a method; None for a staticmethod or a method without one."""
    if any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in method.decorator_list):
        return None
    positional = [*method.args.posonlyargs, *method.args.args]
    return positional[0].arg if positional else None
