"""Regenerates the typed leaf attributes of `ServerArgs` from the bag schemas.

The attributes exist at run time from `leaf_specs(Bags)` alone (the class's `__slots__`); this
writes the matching annotations into server_args.py so a type checker sees one typed attribute
per leaf. A test fails, naming this command, when a leaf was added and the block is stale:

    uv run python -m serve.record.codegen
"""

from __future__ import annotations

import typing
from pathlib import Path
from typing import Any, Literal

from config_bags import leaf_specs
from config_bags.server import Bags
from config_bags.text_values import base_type

BEGIN = "    # BEGIN generated leaves: `uv run python -m serve.record.codegen` rewrites this block\n"
END = "    # END generated leaves\n"
LINE_LENGTH = 120  # the root pyproject's [tool.ruff] line-length
TARGET = Path(__file__).with_name("server_args.py")


def rendered_type(tp: Any) -> str:
    """Source text of a leaf's value type without its constraints: `int | None`, `Literal["a", "b"]`."""
    optional = typing.get_origin(tp) in (typing.Union, type(int | None)) and type(None) in typing.get_args(tp)
    core = base_type(tp)
    if typing.get_origin(core) is Literal:
        text = "Literal[" + ", ".join(repr(c).replace("'", '"') for c in typing.get_args(core)) + "]"
    elif typing.get_origin(core) is tuple:
        text = f"tuple[{rendered_type(typing.get_args(core)[0])}, ...]"
    else:
        text = core.__name__
    return f"{text} | None" if optional else text


def annotation_line(name: str, annotation: str) -> str:
    """One leaf's annotation as `ruff format` leaves it: on one line, or wrapped in parentheses
    when that line would be longer than the project's 120 characters."""
    line = f"    {name}: {annotation}\n"
    return line if len(line) <= LINE_LENGTH + 1 else f"    {name}: (\n        {annotation}\n    )\n"


def generated_block() -> str:
    """The annotation lines for every leaf, grouped by bag, between the markers."""
    lines = [BEGIN]
    namespace = ""
    for spec in leaf_specs(Bags).values():
        if spec.namespace != namespace:
            namespace = spec.namespace
            lines.append(f"    # {namespace}\n")
        lines.append(annotation_line(spec.name, rendered_type(spec.value_type)))
    lines.append(END)
    return "".join(lines)


def regenerated(source: str) -> str:
    """`source` with the block between the markers replaced by the current leaves."""
    head, rest = source.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return head + generated_block() + tail


def main() -> None:
    """Rewrite server_args.py's generated block in place."""
    TARGET.write_text(regenerated(TARGET.read_text()))


if __name__ == "__main__":
    main()
