"""Every way Python binds a name, as the module scan follows it: assignment (plain, annotated,
augmented, to a tuple or list target, starred too), the walrus, `with ... as`, comprehension
targets, `except ... as`, `match` captures, parameters (named, annotated or defaulting like the
record), and where `global`, `nonlocal` and a walrus in a comprehension land. Where the value
is (or may be) the record, the name becomes an alias; where it may hold the record in a part the
census cannot name, the binding is reported as dynamic, once, with its form."""

from __future__ import annotations

import ast

from census.annotations import names_a_type
from census.bag_values import WHOLE_BAG, BagValue
from census.binding_site import Site, cut
from census.findings import Parker, Taker
from census.match_patterns import Capture, Evaluated, Members, steps
from census.scanner_base import ScannerBase
from census.scope import Scope
from census.unpacking import each_iteration, element_of, paired

Unpacked = tuple[ast.expr, BagValue]


class BindingForms(ScannerBase):
    """The binding handlers of the module scan."""

    def _unpacked(self, value: ast.expr | None, scope: Scope) -> Unpacked | None:
        """The expression and bag value a binding of `value` takes, for the copies count."""
        held = None if value is None else self.bag_values.of(value, scope.bags)
        return None if value is None or held is None else (value, held)

    def _bind(
        self, target: ast.AST, value: ast.expr | None, scope: Scope, site: Site, unpacked: Unpacked | None
    ) -> None:
        """Bind `target` to `value`, the expression it takes (None: nothing that is or holds the
        record). `unpacked` is the expression and bag value it takes for the copies count: a
        tuple target not paired element by element hands the whole value's to each name
        (`prefill, decode = attention_backends()`)."""
        if isinstance(target, ast.Name):
            self._bind_name(target.id, value, scope, site, unpacked)
        elif isinstance(target, (ast.Tuple, ast.List)):
            values = paired(target.elts, lambda t: isinstance(t, ast.Starred), value)
            for i, elt in enumerate(target.elts):
                inner = elt.value if isinstance(elt, ast.Starred) else elt
                if values is not None:
                    self._bind(inner, values[i], scope, site, self._unpacked(values[i], scope))
                else:
                    self._bind(inner, None if value is None else element_of(value), scope, site, unpacked)
        elif isinstance(target, ast.Attribute):
            self._bind_attribute(target, value, scope, site, unpacked)
        else:
            if value is not None and self.values.is_or_holds(value, scope):
                self._unresolved(site, scope)  # `d[k] = server_args`: into a container
            if unpacked is not None and isinstance(target, ast.expr) and self._on_instance(target, scope):
                self._copy(target, ast.unparse(target), unpacked[0], unpacked[1], scope)
            self._visit(target, scope)

    def _bind_name(
        self,
        name: str,
        value: ast.expr | None,
        scope: Scope,
        site: Site,
        unpacked: Unpacked | None,
        *,
        typed: bool = False,
        walrus: bool = False,
    ) -> None:
        """`name` takes `value` (`typed`: an annotation says it is the record)."""
        scope.forget(name)
        if typed or self.values.shape(value, scope) is not None:
            scope.env[name] = "alias"
        if value is not None and self.values.holds(value, scope):
            scope.holders.add(name)
            self._unresolved(site, scope)
        if unpacked is not None:
            scope.bags[name] = unpacked[1]
        self._land(name, scope, walrus)

    def _unbind(self, name: str, scope: Scope, *, shadow: bool = False) -> None:
        """`name` is bound to something that is not the record (an import, a def, an exception);
        with `shadow`, even when it is spelled like the record."""
        scope.forget(name)
        if shadow and name in self.names:
            scope.shadowed.add(name)
        self._land(name, scope, False)

    def _land(self, name: str, scope: Scope, walrus: bool) -> None:
        """Carry a binding to the scope a `global`, `nonlocal` or comprehension walrus binds."""
        into = scope.landing(name, walrus)
        if into is None:
            return
        scope.carry(name, into)
        if into.kind == "module":
            if name in scope.env:
                self._global_aliases.add(name)
            if name in scope.holders:
                self._global_holders.add(name)

    def _bind_attribute(
        self, target: ast.Attribute, value: ast.expr | None, scope: Scope, site: Site, unpacked: Unpacked | None
    ) -> None:
        """A write to the record's member; the record parked on the instance; the record (or a
        holder) stored on an attribute the census does not follow."""
        owner = target.value
        is_self = isinstance(owner, ast.Name) and owner.id == scope.self_name
        if self.values.shape(owner, scope) is not None:
            self._write(target, scope, target.attr)
        elif is_self and self.values.shape(value, scope) is not None:
            scope.parked.add(target.attr)
            if self._emit and scope.owner is not None:
                self.findings.parkers.append(Parker(self.path, target.lineno, scope.owner, scope.qualname, target.attr))
        elif target.attr not in self.names and value is not None and self.values.is_or_holds(value, scope):
            self._unresolved(site, scope)
        if unpacked is not None and self._on_instance(target, scope):
            self._copy(target, ast.unparse(target), unpacked[0], unpacked[1], scope)
        self._visit(owner, scope)

    def _assign(self, node: ast.Assign, scope: Scope) -> None:
        self._visit(node.value, scope)
        site = Site("assignment", node)
        unpacked = self._unpacked(node.value, scope)
        for target in node.targets:
            self._bind(target, node.value, scope, site, unpacked)

    def _ann_assign(self, node: ast.AnnAssign, scope: Scope) -> None:
        if node.value is None:
            return
        self._visit(node.value, scope)
        site = Site("assignment", node)
        target = node.target
        if isinstance(target, ast.Name):
            # `sa: ServerArgs = make()`, `schedule: ScheduleBag = pick()`
            unpacked = (
                (node.value, WHOLE_BAG)
                if self.bag_values.is_bag_type(node.annotation)
                else self._unpacked(node.value, scope)
            )
            self._bind_name(
                target.id, node.value, scope, site, unpacked, typed=names_a_type(node.annotation, self.types)
            )
        else:
            self._bind(target, node.value, scope, site, self._unpacked(node.value, scope))

    def _aug_assign(self, node: ast.AugAssign, scope: Scope) -> None:
        """`x += v` holds what `x` held and what `v` is or holds: `rest += [server_args]`."""
        self._visit(node.value, scope)
        kept = ast.Starred(value=node.target, ctx=ast.Load())
        self._bind(
            node.target,
            ast.List(elts=[kept, node.value], ctx=ast.Load()),
            scope,
            Site("augmented assignment", node),
            None,
        )

    def _named_expr(self, node: ast.NamedExpr, scope: Scope) -> None:
        self._visit(node.value, scope)
        site = Site("walrus", node)
        self._bind_name(node.target.id, node.value, scope, site, self._unpacked(node.value, scope), walrus=True)

    def _with(self, node: ast.With | ast.AsyncWith, scope: Scope) -> None:
        for item in node.items:
            self._visit(item.context_expr, scope)
            if item.optional_vars is not None:
                site = Site("with", item.optional_vars, item.context_expr)
                if self._handed_the_record(item.context_expr, scope):
                    # `with ctx(server_args) as a`: what `ctx` enters may be the record or part of
                    # it, and the census cannot say which, so the binding is reported, not dropped.
                    self._unresolved(site, scope)
                self._bind(item.optional_vars, item.context_expr, scope, site, self._unpacked(item.context_expr, scope))
        self._walk(node.body, scope)

    def _handed_the_record(self, value: ast.expr, scope: Scope) -> bool:
        """Whether `value` is a call that is handed the record (or a container holding it) as an
        argument, while not itself the record: what it answers is unknown to the census."""
        if not isinstance(value, ast.Call) or self.values.is_or_holds(value, scope):
            return False
        arguments = [*value.args, *(keyword.value for keyword in value.keywords)]
        return any(self.values.is_or_holds(a.value if isinstance(a, ast.Starred) else a, scope) for a in arguments)

    def _comprehension(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp, scope: Scope) -> None:
        """Its targets are its own (they end no alias outside it); its generators run before its
        elements; it holds the record when its elements are or hold the record."""
        inner = scope.comprehension()
        for generator in node.generators:
            self._visit(generator.iter, inner)
            site = Site("comprehension", generator.target, generator.iter)
            self._bind(generator.target, each_iteration(generator.iter), inner, site, None)
            for condition in generator.ifs:
                self._visit(condition, inner)
        elements = (node.key, node.value) if isinstance(node, ast.DictComp) else (node.elt,)
        for element in elements:
            self._visit(element, inner)
        if any(self.values.is_or_holds(element, inner) for element in elements):
            self.values.holding.add(node)
        else:
            self.values.holding.discard(node)

    def _except(self, node: ast.ExceptHandler, scope: Scope) -> None:
        """`except E as name` binds an exception, never the record."""
        if node.type is not None:
            self._visit(node.type, scope)
        if node.name is not None:
            self._unbind(node.name, scope)
        self._walk(node.body, scope)
        if node.name is not None:
            self._unbind(node.name, scope)  # Python deletes it when the handler ends

    def _pattern(self, pattern: ast.pattern, subject: ast.expr, scope: Scope) -> None:
        """A case's captures bind like assignments; a class pattern on the record reads its
        keyword members, and its positional ones are named by `__match_args__` (dynamic)."""
        site = Site("match", pattern)
        for step in steps(pattern, subject, self.types):
            if isinstance(step, Capture):
                self._bind_name(step.name, step.value, scope, site, self._unpacked(step.value, scope))
            elif isinstance(step, Members):
                shape = self.values.shape(step.subject, scope)
                if shape is not None:
                    for attr in step.named:
                        self._read(step.pattern.lineno, scope, attr, shape)
                    if step.positional:
                        self._dynamic(
                            step.pattern.lineno, scope, "match_args", cut(f"case {ast.unparse(step.pattern)}")
                        )
            elif isinstance(step, Evaluated):
                self._visit(step.expr, scope)

    def _global(self, node: ast.Global, scope: Scope) -> None:
        scope.globals.update(node.names)

    def _nonlocal(self, node: ast.Nonlocal, scope: Scope) -> None:
        scope.nonlocals.update(node.names)

    def _parameters(self, args: ast.arguments, scope: Scope, inner: Scope) -> None:
        """Parameters named or annotated like the record are the record; one whose default is
        the record may be (`def f(sa=server_args)`, `lambda sa=server_args: ...`)."""
        positional = [*args.posonlyargs, *args.args]
        defaults: dict[str, ast.expr] = {
            a.arg: d for a, d in zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
        }
        defaults.update({a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None})
        for expr in defaults.values():
            self._visit(expr, scope)
        every = [*positional, *args.kwonlyargs]
        every += [a for a in (args.vararg, args.kwarg) if a is not None]
        for arg in every:
            inner.forget(arg.arg)
            typed = names_a_type(arg.annotation, self.types)
            default = defaults.get(arg.arg)
            if typed or self.values.shape(default, scope) is not None:
                inner.env[arg.arg] = "direct" if typed else "alias"
            if default is not None and self.values.holds(default, scope):
                inner.holders.add(arg.arg)
                self._unresolved(Site("parameter default", arg, default), inner)
            if self.bag_values.is_bag_type(arg.annotation):
                inner.bags[arg.arg] = WHOLE_BAG
            if (arg.arg in inner.env or arg.arg in self.names) and self._emit:
                self.findings.takers.append(Taker(self.path, arg.lineno, inner.qualname, arg.arg))
            if arg.annotation is not None:
                self._visit(arg.annotation, scope)
