"""The census of one module: walks its AST in source order, following the record through local
aliases and through attributes a class (or a base class) parks it on, and records every read,
write, dynamic read, record-taking function and copy of a bag value into an instance attribute.

The record is any name or attribute spelled like one of `RecordNames.names` (`server_args`,
`self.server_args`, `self.model_runner.server_args`), any parameter or variable annotated with
one of `RecordNames.types` (`ServerArgs`), a call of one of those types, and anything bound
from those:
`sa = x.server_args` (also tuple unpacking, `:=` and `with ... as sa`, and aliases of aliases),
and `self.args = server_args` in one method, read as `self.args.page_size` in any other, and in
the methods of subclasses when the class graph hands the parking down (`inherited`).

A copy is an assignment (plain, annotated, to a tuple target, or a literal `setattr`) of a bag
value (see `bag_values`) to an attribute of the instance (`self.x`, `self.a.b`, `self.d[k]`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from census.annotations import names_a_type
from census.bag_names import NO_BAGS, BagNames
from census.bag_values import WHOLE_BAG, BagValue, BagValues
from census.findings import ClassFacts, Copy, DynamicRead, ModuleFindings, Read, Shape, Taker, Write

DYNAMIC_CALLS = frozenset({"vars", "asdict"})
NAMED_MEMBER_CALLS = frozenset({"getattr", "hasattr"})
MAX_PARKING_ROUNDS = 8
# Nodes with nothing below them that could reach the record: skipped without a lookup.
CHILDLESS: frozenset[type[ast.AST]] = frozenset(
    {ast.Name, ast.Constant, ast.Load, ast.Store, ast.Del, ast.Pass, ast.Break, ast.Continue}
    | {
        cls
        for cls in vars(ast).values()
        if isinstance(cls, type) and issubclass(cls, (ast.operator, ast.unaryop, ast.cmpop, ast.boolop))
    }
)
NO_PARKING: frozenset[str] = frozenset()


@dataclass(frozen=True)
class RecordNames:
    """How the record is spelled in the scanned code."""

    names: frozenset[str] = frozenset({"server_args"})
    types: frozenset[str] = frozenset({"ServerArgs"})


class _Scope:
    """A function (or module, or class body): its local record aliases, its local bag values,
    its class's parking and the parking its class inherits."""

    __slots__ = ("qualname", "env", "bags", "self_name", "parked", "inherited")

    def __init__(
        self,
        qualname: str,
        env: dict[str, Shape],
        bags: dict[str, BagValue],
        self_name: str | None,
        parked: set[str],
        inherited: frozenset[str] = NO_PARKING,
    ) -> None:
        self.qualname = qualname
        self.env = env
        self.bags = bags
        self.self_name = self_name
        self.parked = parked
        self.inherited = inherited

    def within(self, qualname: str, self_name: str | None) -> _Scope:
        """A function's scope inside this one: copies of the local tables, the same parking."""
        return _Scope(qualname, dict(self.env), dict(self.bags), self_name, self.parked, self.inherited)

    def child(self, name: str) -> str:
        return name if self.qualname == "<module>" else f"{self.qualname}.{name}"


# The default: the record as this repository and SGLang spell it.
SERVER_ARGS = RecordNames()


class ModuleScanner:
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
        self.path = path
        self.names = names.names
        self.types = names.types
        self.bag_of = bag_of
        self.bag_values = BagValues(bags, bag_of)
        self.inherited = inherited or {}
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
            ast.Import: self._import,
            ast.ImportFrom: self._import_from,
        }

    def scan(self, tree: ast.Module) -> ModuleFindings:
        """Scan the whole module."""
        scope = _Scope("<module>", {}, {}, None, set())
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
            attr = node.attr
            if (
                (attr in scope.parked or attr in scope.inherited)
                and isinstance(owner, ast.Name)
                and owner.id == scope.self_name
            ):
                return "parked" if attr in scope.parked else "inherited"
            return None
        if isinstance(node, ast.NamedExpr):
            return self._shape(node.value, scope)
        if isinstance(node, ast.Call):  # constructing the record: `ServerArgs(...)`
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            return "direct" if name in self.types else None
        return None

    def _on_instance(self, target: ast.expr, scope: _Scope) -> bool:
        """Whether `target` is an attribute of the instance: `self.x`, `self.a.b`, `self.d[k]`."""
        through_attribute = False
        node = target
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            through_attribute = through_attribute or isinstance(node, ast.Attribute)
            node = node.value
        return through_attribute and isinstance(node, ast.Name) and node.id == scope.self_name

    # -- emitting

    def _read(self, node: ast.expr, scope: _Scope, leaf: str, shape: Shape) -> None:
        if self._emit:
            self.findings.reads.append(Read(self.path, node.lineno, scope.qualname, leaf, self.bag_of.get(leaf), shape))

    def _write(self, node: ast.expr, scope: _Scope, leaf: str) -> None:
        if self._emit:
            self.findings.writes.append(Write(self.path, node.lineno, scope.qualname, leaf, self.bag_of.get(leaf)))

    def _dynamic(self, node: ast.expr, scope: _Scope, kind: str) -> None:
        if self._emit:
            self.findings.dynamic.append(DynamicRead(self.path, node.lineno, scope.qualname, kind, _text(node)))

    def _copy(self, target: ast.expr, target_text: str, value: ast.expr, held: BagValue, scope: _Scope) -> None:
        if self._emit:
            bag = self.bag_of.get(held.leaf) if held.leaf is not None else None
            self.findings.copies.append(
                Copy(self.path, target.lineno, scope.qualname, target_text, _text(value), held.leaf, bag)
            )

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
        if name == "setattr" and len(args) == 3:
            self._setattr_copy(node, scope)
        self._visit(func, scope)
        for arg in args:
            self._visit(arg, scope)
        for keyword in node.keywords:
            self._visit(keyword.value, scope)

    def _setattr_copy(self, node: ast.Call, scope: _Scope) -> None:
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

    # -- bindings

    def _bind(
        self, target: ast.AST, value: ast.expr | None, scope: _Scope, unpacked: tuple[ast.expr, BagValue] | None = None
    ) -> None:
        """Bind `target` to `value` (None: to something that is not the record). `unpacked` is
        the expression and bag value a tuple target takes apart when it is not paired element
        by element (`prefill, decode = attention_backends()`)."""
        if value is not None:
            held = self.bag_values.of(value, scope.bags)
            unpacked = None if held is None else (value, held)
        if isinstance(target, ast.Name):
            if self._shape(value, scope) is not None:
                scope.env[target.id] = "alias"
            else:
                scope.env.pop(target.id, None)
            if unpacked is not None:
                scope.bags[target.id] = unpacked[1]
            else:
                scope.bags.pop(target.id, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            elts = target.elts
            values = value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
            paired = (
                values is not None and len(values) == len(elts) and not any(isinstance(e, ast.Starred) for e in elts)
            )
            for i, elt in enumerate(elts):
                if paired and values is not None:
                    self._bind(elt, values[i], scope)
                else:
                    self._bind(elt, None, scope, unpacked)
        elif isinstance(target, ast.Starred):
            self._bind(target.value, None, scope, unpacked)
        elif isinstance(target, ast.Attribute):
            owner = target.value
            if self._shape(owner, scope) is not None:
                self._write(target, scope, target.attr)
            elif isinstance(owner, ast.Name) and owner.id == scope.self_name and self._shape(value, scope) is not None:
                scope.parked.add(target.attr)
            if unpacked is not None and self._on_instance(target, scope):
                self._copy(target, ast.unparse(target), unpacked[0], unpacked[1], scope)
            self._visit(owner, scope)
        else:
            if unpacked is not None and isinstance(target, ast.expr) and self._on_instance(target, scope):
                self._copy(target, ast.unparse(target), unpacked[0], unpacked[1], scope)
            self._visit(target, scope)

    def _assign(self, node: ast.Assign, scope: _Scope) -> None:
        self._visit(node.value, scope)
        for target in node.targets:
            self._bind(target, node.value, scope)

    def _ann_assign(self, node: ast.AnnAssign, scope: _Scope) -> None:
        if node.value is None:
            return
        self._visit(node.value, scope)
        if isinstance(node.target, ast.Name) and names_a_type(node.annotation, self.types):
            scope.env[node.target.id] = "alias"  # `sa: ServerArgs = make()`
        else:
            self._bind(node.target, node.value, scope)
        if isinstance(node.target, ast.Name) and self.bag_values.is_bag_type(node.annotation):
            scope.bags[node.target.id] = WHOLE_BAG  # `schedule: ScheduleBag = pick()`

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

    def _parameters(self, args: ast.arguments, scope: _Scope, inner: _Scope) -> None:
        qualname = inner.qualname
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        every += [a for a in (args.vararg, args.kwarg) if a is not None]
        for arg in every:
            inner.env.pop(arg.arg, None)
            inner.bags.pop(arg.arg, None)
            typed = names_a_type(arg.annotation, self.types)
            if typed:
                inner.env[arg.arg] = "direct"
            if self.bag_values.is_bag_type(arg.annotation):
                inner.bags[arg.arg] = WHOLE_BAG
            if (typed or arg.arg in self.names) and self._emit:
                self.findings.takers.append(Taker(self.path, arg.lineno, qualname, arg.arg))
            if arg.annotation is not None:
                self._visit(arg.annotation, scope)
        for default in (*args.defaults, *(d for d in args.kw_defaults if d is not None)):
            self._visit(default, scope)

    def _function(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef, scope: _Scope, *, self_name: str | None = None
    ) -> None:
        for decorator in node.decorator_list:
            self._visit(decorator, scope)
        if node.returns is not None:
            self._visit(node.returns, scope)
        inner = scope.within(scope.child(node.name), self_name or scope.self_name)
        self._parameters(node.args, scope, inner)
        for stmt in node.body:
            self._visit(stmt, inner)

    def _lambda(self, node: ast.Lambda, scope: _Scope) -> None:
        inner = scope.within(scope.child("<lambda>"), scope.self_name)
        self._parameters(node.args, scope, inner)
        self._visit(node.body, inner)

    def _class(self, node: ast.ClassDef, scope: _Scope) -> None:
        for expr in (*node.decorator_list, *node.bases, *(k.value for k in node.keywords)):
            self._visit(expr, scope)
        qualname = scope.child(node.name)
        body = _Scope(
            qualname, dict(scope.env), dict(scope.bags), None, set(), self.inherited.get(qualname, NO_PARKING)
        )
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

    # -- imports, for the class graph and for renamed accessors

    def _import(self, node: ast.Import, scope: _Scope) -> None:
        for alias in node.names:
            if alias.asname is not None:
                self.findings.imports[alias.asname] = (0, alias.name)
            else:
                head = alias.name.partition(".")[0]
                self.findings.imports[head] = (0, head)

    def _import_from(self, node: ast.ImportFrom, scope: _Scope) -> None:
        for alias in node.names:
            if alias.name == "*":
                continue
            bound = alias.asname or alias.name
            self.findings.imports[bound] = (node.level, f"{node.module}.{alias.name}" if node.module else alias.name)
            self.bag_values.imported(alias.name, bound)


def _text(node: ast.expr) -> str:
    """The expression as written, cut at 120 characters."""
    text = ast.unparse(node)
    return text if len(text) <= 120 else text[:117] + "..."


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
