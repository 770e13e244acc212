"""Forced tool calls: tool_choice "required" or naming a function. The grammar engine constrains
the output to JSON that is the call, so it is always well-formed and its arguments always match
the function's parameters schema, on any model (its chat template need not render tools), and
the output is read as that JSON directly, with no family's markers.

- A named function: the output is the arguments object itself (the function's schema); the call
  opens, named, before the first token.
- "required": the output is a JSON array of calls `[{"name": ..., "arguments": {...}}, ...]`, at
  least one (exactly one when parallel_tool_calls is false), each item one of the offered
  functions with its own schema (anyOf). Each function's schema is kept whole under the root's
  `$defs` (its own `$defs` beside it, their references renamed), so the references of a schema
  that uses `$defs` (pydantic's, for nested models) still resolve inside the array's schema.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from runtime_scheduler import OutputConstraint
from serve.assistant.events import Arguments, CallOpened, Event, new_call_id
from serve.tool_calls.json_calls import CallSyntax, JsonCallReader

REQUIRED_SYNTAX = CallSyntax(
    opener=None, leading="[", leading_object=False, separator=",", closer="]", argument_keys=("arguments",)
)
_DEFINITIONS = ("$defs", "definitions")


def named_constraint(parameters: Mapping[str, Any]) -> OutputConstraint:
    """The output of a call forced by name: its arguments, matching the function's schema."""
    return OutputConstraint(kind="json_schema", text=json.dumps(parameters))


def required_schema(functions: Sequence[tuple[str, Mapping[str, Any]]], one: bool) -> dict[str, Any]:
    """The schema of a "required" turn's output: an array of calls of `functions` (name,
    parameters schema), at least one, exactly `one` when asked."""
    definitions: dict[str, Any] = {}
    calls = []
    for i, (name, parameters) in enumerate(functions):
        prefix = f"f{i}"
        own = {k: v for k, v in parameters.items() if k not in _DEFINITIONS}
        definitions[prefix] = _renamed_refs(own, prefix)
        for key in _DEFINITIONS:
            for def_name, definition in parameters.get(key, {}).items():
                definitions[f"{prefix}_{def_name}"] = _renamed_refs(definition, prefix)
        calls.append(
            {
                "type": "object",
                "properties": {"name": {"const": name}, "arguments": {"$ref": f"#/$defs/{prefix}"}},
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    schema: dict[str, Any] = {"type": "array", "items": {"anyOf": calls}, "minItems": 1, "$defs": definitions}
    if one:
        schema["maxItems"] = 1
    return schema


def required_constraint(functions: Sequence[tuple[str, Mapping[str, Any]]], one: bool) -> OutputConstraint:
    """The output of a "required" turn (`required_schema`)."""
    return OutputConstraint(kind="json_schema", text=json.dumps(required_schema(functions, one)))


def _renamed_refs(schema: Any, prefix: str) -> Any:
    """`schema` with its references moved under the root's `$defs`: its own root (`#`) to
    `prefix`, its definitions to `prefix_<name>`."""
    if isinstance(schema, list):
        return [_renamed_refs(item, prefix) for item in schema]
    if not isinstance(schema, dict):
        return schema
    renamed = {key: _renamed_refs(value, prefix) for key, value in schema.items()}
    ref = schema.get("$ref")
    if isinstance(ref, str):
        if ref == "#":
            renamed["$ref"] = f"#/$defs/{prefix}"
        for key in _DEFINITIONS:
            if ref.startswith(f"#/{key}/"):
                renamed["$ref"] = f"#/$defs/{prefix}_{ref[len(key) + 3 :]}"
    return renamed


def required_reader(names: Collection[str]) -> JsonCallReader:
    """A reader of a "required" turn's array of calls."""
    return JsonCallReader(REQUIRED_SYNTAX, names)


class NamedCallReader:
    """Reads a turn forced to call `name`: the call opens at once, and all the text is its arguments."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._opened = False

    def feed(self, text: str) -> list[Event]:
        """The call's opening (first time), then the text as its arguments."""
        events: list[Event] = []
        if not self._opened:
            self._opened = True
            events.append(CallOpened(0, new_call_id(), self._name))
        if text:
            events.append(Arguments(0, text))
        return events

    def finish(self) -> list[Event]:
        """The call's opening, when no text came at all."""
        return self.feed("")
