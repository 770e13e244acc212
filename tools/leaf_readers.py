"""Which packages read each leaf: a walk of the packages' source for reads through the bag accessors.

    uv run python tools/leaf_readers.py          # a markdown table: leaf -> reading packages

A read is an attribute of a bag expression that names a leaf of that bag. A bag expression is an
accessor call (`get_schedule()`, `published_bags()`), a sub-bag of one (`get_exec().kernel`), a
local bound to one (`schedule = get_schedule()`, tuples and `:=` too), or a parameter annotated
with a bag type (`kernel: KernelBag`). A function that reads through a parameter reads those
leaves for every caller that passes it a bag expression (`chunk_size_of(get_schedule())`), and a
function's own accessor reads count for every caller (`attention_backends()`), to a fixed point.
A call is followed into functions of the caller's own package and of config-bags (its helpers and
derived accessors), matched by name; a read is credited to the package whose code makes it, so a
call into another package's code (serve driving the scheduler) credits that package, not the
caller. config-bags' own source is walked for its helpers but is not a reader; nor is serve's
launch record (serve/record), which reads the flat record, never the published bags.
"""

from __future__ import annotations

import ast
import typing
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import config_bags
import config_bags.server
from config_bags.bag import Bag
from config_bags.server import Bags

ROOT = Path(__file__).resolve().parents[1]
NOT_READERS = ("packages/config-bags/", "packages/serve/src/serve/record/")


def _bag_members() -> tuple[dict[str, frozenset[str]], dict[str, dict[str, str]]]:
    """Per bag class name: its leaves, and its sub-bags (field -> class name)."""
    leaves: dict[str, frozenset[str]] = {}
    subs: dict[str, dict[str, str]] = {}

    def walk(cls: type[Bag]) -> None:
        hints = typing.get_type_hints(cls)
        subs[cls.__name__] = {
            n: hints[n].__name__
            for n in cls.__struct_fields__
            if isinstance(hints[n], type) and issubclass(hints[n], Bag)
        }
        leaves[cls.__name__] = frozenset(n for n in cls.__struct_fields__ if n not in subs[cls.__name__])
        for name in subs[cls.__name__]:
            walk(hints[name])

    walk(Bags)
    return leaves, subs


LEAVES, SUB_BAGS = _bag_members()
ACCESSORS = {f"get_{ns}": typing.get_type_hints(Bags)[ns].__name__ for ns in Bags.__struct_fields__} | {
    "published_bags": "Bags"
}

Root = str | int  # "accessor", or the index of the parameter a bag expression came from


@dataclass
class Summary:
    """What one function reads: through accessors, and through each bag-typed parameter."""

    params: list[str] = field(default_factory=list)
    direct: set[str] = field(default_factory=set)
    via_param: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))
    calls: list[tuple[str, list[tuple[int | str, Root]]]] = field(
        default_factory=list
    )  # callee, [(position or keyword, root)] of its bag arguments
    method: bool = False


def _name_of(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.split(".")[-1].split("|")[0].strip()
    return None


class _FunctionWalk(ast.NodeVisitor):
    """Collect one function body's reads and calls (nested functions are walked on their own)."""

    def __init__(self, summary: Summary, env: dict[str, tuple[Root, str]]) -> None:
        self.summary = summary
        self.env = env

    def bag_of(self, node: ast.expr) -> tuple[Root, str] | None:
        """(root, bag class name) of a bag expression, else None."""
        if isinstance(node, ast.Call):
            name = _name_of(node.func)
            return ("accessor", ACCESSORS[name]) if name in ACCESSORS and not node.args else None
        if isinstance(node, ast.Name):
            return self.env.get(node.id)
        if isinstance(node, ast.Attribute):
            inner = self.bag_of(node.value)
            if inner is not None and node.attr in SUB_BAGS[inner[1]]:
                return inner[0], SUB_BAGS[inner[1]][node.attr]
        return None

    def bind(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            found = self.bag_of(value)
            if found is not None:
                self.env[target.id] = found
        elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple):
            for t, v in zip(target.elts, value.elts, strict=False):
                self.bind(t, v)

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        for target in node.targets:
            self.bind(target, node.value)

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.generic_visit(node)
        self.bind(node.target, node.value)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        found = self.bag_of(node.value)
        if found is not None and node.attr in LEAVES[found[1]]:
            root, _ = found
            (self.summary.direct if root == "accessor" else self.summary.via_param[int(root)]).add(node.attr)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        callee = _name_of(node.func)
        if callee is not None:
            args: list[tuple[int | str, ast.expr]] = [(i, a) for i, a in enumerate(node.args)]
            args += [(k.arg, k.value) for k in node.keywords if k.arg is not None]
            bag_args = [(position, found[0]) for position, arg in args if (found := self.bag_of(arg)) is not None]
            self.summary.calls.append((callee, bag_args))
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        return  # walked as its own function

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]


def _summaries_of(tree: ast.Module) -> list[tuple[str, Summary]]:
    found: list[tuple[str, Summary]] = []
    module = Summary()
    walker = _FunctionWalk(module, {})
    for stmt in tree.body:
        walker.visit(stmt)
    found.append(("<module>", module))
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        params = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        summary = Summary(method=bool(params) and params[0].arg in ("self", "cls"))
        if summary.method:
            params = params[1:]
        summary.params = [p.arg for p in params]
        env: dict[str, tuple[Root, str]] = {}
        for i, p in enumerate(params):
            bag = _name_of(p.annotation) if p.annotation is not None else None
            if bag in LEAVES:
                env[p.arg] = (i, bag)
        walker = _FunctionWalk(summary, env)
        for stmt in node.body:
            walker.visit(stmt)
        found.append((node.name, summary))
    return found


def leaf_readers(root: Path = ROOT) -> dict[str, set[str]]:
    """Leaf -> the packages (directory names under packages/) whose source reads it."""
    functions: dict[tuple[str, str], list[Summary]] = defaultdict(list)  # (package, name) -> definitions
    owners: list[tuple[str, Summary]] = []
    every: list[tuple[str, Summary]] = []
    for path in sorted((root / "packages").glob("*/src/**/*.py")):
        relative = path.relative_to(root).as_posix()
        package = relative.split("/")[1]
        for name, summary in _summaries_of(ast.parse(path.read_text(encoding="utf-8-sig"), relative)):
            functions[package, name].append(summary)
            every.append((package, summary))
            if not relative.startswith(NOT_READERS):
                owners.append((package, summary))

    def targets(package: str, callee: str) -> list[Summary]:
        return [
            *functions.get((package, callee), ()),
            *(functions.get(("config-bags", callee), ()) if package != "config-bags" else ()),
        ]

    def callee_reads(package: str, callee: str, position: int | str) -> set[str]:
        leaves: set[str] = set()
        for target in targets(package, callee):
            index = (
                target.params.index(position) if isinstance(position, str) and position in target.params else position
            )
            if isinstance(index, int):
                leaves |= target.via_param.get(index, set())
        return leaves

    changed = True
    while changed:
        changed = False
        for package, summary in every:
            before = (len(summary.direct), sum(len(v) for v in summary.via_param.values()))
            for callee, bag_args in summary.calls:
                for target in targets(package, callee):
                    summary.direct |= target.direct
                for position, root in bag_args:
                    if root == "accessor":
                        summary.direct |= callee_reads(package, callee, position)
                    else:
                        summary.via_param[int(root)] |= callee_reads(package, callee, position)
            changed |= before != (len(summary.direct), sum(len(v) for v in summary.via_param.values()))
    readers: dict[str, set[str]] = {name: set() for name in config_bags.leaf_specs(config_bags.server.Bags)}
    for package, summary in owners:
        for leaf in summary.direct:
            readers[leaf].add(package)
    return readers


def main() -> None:
    print("| leaf | namespace | read by |")
    print("| --- | --- | --- |")
    for leaf, packages in leaf_readers().items():
        namespace = config_bags.leaf_spec(leaf, config_bags.server.Bags).namespace
        print(f"| {leaf} | {namespace} | {', '.join(sorted(packages)) or '(nothing)'} |")


if __name__ == "__main__":
    main()
