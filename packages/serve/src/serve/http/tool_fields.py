"""The tool-calling fields of a chat request, in OpenAI's shapes: the functions offered (`tools`),
which of them the model may or must call (`tool_choice`, `parallel_tool_calls`), and in the
conversation an assistant turn's calls and the tool results that answer them.

Refused with a 400 naming the field: a function name outside OpenAI's `[A-Za-z0-9_-]{1,64}` or
offered twice; a parameters schema that is not an object schema or that the grammar engine does
not compile (its compiler's message is quoted, with the function's name: every call's arguments
are held to it, so a schema refused here would fail there); a `tool_choice` naming a
function that is not offered, or asking for a call with no tools offered; arguments of a past
call that are not a JSON object (the templates render them as one); a tool result whose
`tool_call_id` answers no call of an earlier assistant turn (the templates render a result after
the call it answers, and a result without one is a client's bookkeeping error).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Literal, Protocol, Self

from pydantic import model_validator

from runtime_scheduler import OutputConstraint
from serve.grammar.xgrammar_engine import grammar_of
from serve.http.errors import refused_field, shown
from serve.http.request_object import RequestObject
from serve.http.unserved_fields import TOOL_CALL_FIELDS

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
NO_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}, "additionalProperties": False}


class FunctionDefinition(RequestObject):
    """A function the model may call: its name, what it does, and its parameters' JSON schema."""

    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None
    strict: bool | None = None

    @model_validator(mode="after")
    def _name_and_parameters(self) -> Self:
        if not _NAME.fullmatch(self.name):
            raise refused_field(
                "name",
                "a function's name is 1 to 64 letters, digits, underscores or dashes (as OpenAI's); got "
                + shown(self.name),
            )
        if self.parameters is None:
            return self
        kind = self.parameters.get("type", "object")
        if kind != "object":
            raise refused_field(
                "parameters",
                f"a function's parameters are an object schema (the call's arguments are a JSON object); got type "
                f'{shown(kind)}; send {{"type": "object", "properties": {{...}}}}',
            )
        try:
            grammar_of(OutputConstraint(kind="json_schema", text=json.dumps(self.parameters)))
        except ValueError as err:
            raise refused_field(
                "parameters", f"function {self.name!r}: not a JSON schema the grammar engine compiles: {err}"
            ) from None
        return self

    def parameters_schema(self) -> dict[str, Any]:
        """The schema of the call's arguments, an object: no parameters means an empty one, and a
        schema that names no type (`{}`) is made an object's (a call's arguments are one)."""
        if self.parameters is None:
            return NO_PARAMETERS
        return self.parameters if "type" in self.parameters else {"type": "object", **self.parameters}


class Tool(RequestObject):
    """A tool the model may call (OpenAI's tools entry; functions are the only kind)."""

    type: Literal["function"]
    function: FunctionDefinition

    def template_tool(self) -> dict[str, Any]:
        """The tool as the chat template is given it (the JSON sent, without its nulls)."""
        return {"type": self.type, "function": self.function.model_dump(exclude_none=True)}


class NamedFunction(RequestObject):
    """The function a named tool_choice forces."""

    name: str


class NamedToolChoice(RequestObject):
    """`{"type": "function", "function": {"name": ...}}`: the model must call this function."""

    type: Literal["function"]
    function: NamedFunction


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


def arguments_object(arguments: str) -> dict[str, Any]:
    """A past call's arguments, parsed: refused (`refused_field` "arguments") unless the JSON text
    of an object, as the templates render them."""
    try:
        parsed = json.loads(arguments)
    except json.JSONDecodeError as err:
        raise refused_field("arguments", f"not JSON ({err}); send the call's arguments as a JSON object") from None
    if not isinstance(parsed, dict):
        raise refused_field("arguments", f"a call's arguments are a JSON object; got {shown(arguments)}")
    return parsed


class CalledFunction(RequestObject):
    """The function a past call called, and its arguments as the JSON text the model wrote (with
    the parse of them the openai client's helpers send back, which must agree)."""

    name: str
    arguments: str
    parsed_arguments: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _arguments_are_an_object(self) -> Self:
        parsed = arguments_object(self.arguments)
        if self.parsed_arguments is not None and self.parsed_arguments != parsed:
            raise refused_field(
                "parsed_arguments",
                "differs from the arguments it is a parse of (the template renders the arguments); send the "
                "arguments alone",
            )
        return self


class ToolCall(RequestObject):
    """A call an assistant turn made."""

    unserved = TOOL_CALL_FIELDS

    id: str
    type: Literal["function"]
    function: CalledFunction

    def template_call(self) -> dict[str, Any]:
        """The call as chat templates expect it: its arguments parsed into an object."""
        function = {"name": self.function.name, "arguments": json.loads(self.function.arguments)}
        return {"id": self.id, "type": self.type, "function": function}


def check_tools(tools: Sequence[Tool]) -> None:
    """Refuse a function name offered twice (a call names the function it calls)."""
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        name = tool.function.name
        if name in seen:
            raise refused_field(f"tools.{i}.function.name", f"function {name!r} is offered twice; names are unique")
        seen.add(name)


def check_tool_choice(tools: Sequence[Tool], choice: ToolChoice) -> None:
    """Refuse a choice the tools do not allow: naming no offered function, or forcing a call with
    none offered."""
    names = [tool.function.name for tool in tools]
    if isinstance(choice, NamedToolChoice):
        if choice.function.name not in names:
            offered = ", ".join(names) or "none"
            raise refused_field(
                "tool_choice.function.name",
                f"{choice.function.name!r} is not among the tools offered (offered: {offered}); name one of them",
            )
    elif choice == "required" and not tools:
        raise refused_field("tool_choice", "'required' asks for a tool call, and no tools are offered; send tools")


class ConversationTurn(Protocol):
    """What the result check reads of a message."""

    @property
    def role(self) -> str: ...

    @property
    def tool_calls(self) -> list[ToolCall] | None: ...

    @property
    def tool_call_id(self) -> str | None: ...


def check_tool_results(messages: Sequence[ConversationTurn]) -> None:
    """Refuse a tool result whose tool_call_id answers no call of an earlier assistant turn."""
    called: set[str] = set()
    for i, message in enumerate(messages):
        called.update(call.id for call in message.tool_calls or ())
        if message.role == "tool" and message.tool_call_id not in called:
            known = ", ".join(sorted(called)) or "none"
            raise refused_field(
                f"messages.{i}.tool_call_id",
                f"{message.tool_call_id!r} answers no tool call of an earlier assistant message (their ids: {known}); "
                "send the assistant message with the call before its result",
            )
