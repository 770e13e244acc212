"""The scheduler reads configuration only through the published bags: no launch record, no serve."""

import ast
from pathlib import Path

import runtime_scheduler

SOURCE = Path(runtime_scheduler.__file__).parent
RECORD_NAMES = {"server_args", "ServerArgs", "args"}


def _record_reads(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in RECORD_NAMES:
            found.append(node.id)
        elif isinstance(node, ast.Attribute) and node.attr in RECORD_NAMES:
            found.append(node.attr)
        elif isinstance(node, ast.arg) and node.arg in RECORD_NAMES:
            found.append(node.arg)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "serve":
            found.append(f"from {node.module}")
        elif isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name.split(".")[0] == "serve"]
    return found


def test_no_module_names_the_launch_record_or_imports_serve() -> None:
    """Reverse-verified: adding `def f(server_args): return server_args.page_size` to
    scheduler.py makes this test fail, naming the file."""
    files = sorted(SOURCE.rglob("*.py"))
    assert len(files) >= 10
    offenders = {str(f.relative_to(SOURCE)): reads for f in files if (reads := _record_reads(ast.parse(f.read_text())))}
    assert offenders == {}
