"""The request of POST /v1/responses, in OpenAI's shapes: the input (a string, or a list of items:
messages, function calls, their outputs, reasoning), instructions, function tools and
tool_choice, the text format, sampling (with chat's seed and logit_bias as extensions) and length,
streaming, and the store fields.

Refused with a 400 naming the field: an input item of a type this server does not read (naming
the type and the accepted ones), a content part that is not text (a text-only model), a tool that
is not a function (OpenAI's built-in tools, named: this server runs none of them), and any field
the table of `serve.http.unserved_fields` would not act on. Everything else is checked by the
chat request it runs as (`serve.http.responses_chat`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self

from pydantic import Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from serve.http.errors import refused_field, shown
from serve.http.protocol import Count, Int64, LogitBias, ReasoningEffort
from serve.http.request_object import RequestObject
from serve.http.tool_fields import FunctionDefinition, arguments_object
from serve.http.unserved_fields import (
    JSON_SCHEMA_FORMAT_FIELDS,
    RESPONSES_CALL_FIELDS,
    RESPONSES_FIELDS,
    RESPONSES_MESSAGE_FIELDS,
    RESPONSES_OUTPUT_FIELDS,
    RESPONSES_REASONING_FIELDS,
    RESPONSES_REASONING_ITEM_FIELDS,
    RESPONSES_TEXT_FIELDS,
    RESPONSES_TEXT_PART_FIELDS,
)

# OpenAI's tools that its own servers run, and what each would do.
BUILT_IN_TOOLS = {
    "web_search": "search the web",
    "web_search_preview": "search the web",
    "web_search_2025_08_26": "search the web",
    "web_search_preview_2025_03_11": "search the web",
    "file_search": "search uploaded files",
    "computer_use_preview": "operate a computer",
    "computer_use": "operate a computer",
    "code_interpreter": "run code",
    "image_generation": "generate images",
    "mcp": "call a remote MCP server",
    "local_shell": "run shell commands",
    "shell": "run shell commands",
    "apply_patch": "edit files by patches",
    "custom": "call a tool with free-form input",
}


class ResponsesTextPart(RequestObject):
    """A text part of a message's content (`input_text`, or `output_text` in an answer sent back)."""

    unserved = RESPONSES_TEXT_PART_FIELDS

    type: Literal["input_text", "output_text"]
    text: str


def _text_parts(content: Any, prefix: str) -> Any:
    """Refuse a content part that is not text by its type (a text-only model)."""
    if not isinstance(content, list):
        return content
    for i, part in enumerate(content):
        kind = part.get("type") if isinstance(part, Mapping) else None
        if isinstance(kind, str) and kind not in ("input_text", "output_text"):
            raise refused_field(
                f"{prefix}{i}.type",
                f"content part type {shown(kind)} is not supported here: this server serves a text-only model; send "
                "the content as a string or as parts of type 'input_text' (or 'output_text' in an assistant message)",
            )
    return content


def _joined(content: str | list[ResponsesTextPart]) -> str:
    return content if isinstance(content, str) else "".join(part.text for part in content)


class MessageItem(RequestObject):
    """A message of the conversation: role and text (a string, or text parts)."""

    unserved = RESPONSES_MESSAGE_FIELDS

    type: Literal["message"] = "message"
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[ResponsesTextPart]

    @classmethod
    def served(cls, data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        """`data` after the content-part refusals, then the table's."""
        _text_parts(data.get("content"), f"{prefix}content.")
        return super().served(data, prefix)

    def text(self) -> str:
        """The content as one string."""
        return _joined(self.content)


class FunctionCallItem(RequestObject):
    """A call the model made: the function, its arguments (a JSON object's text) and its call id."""

    unserved = RESPONSES_CALL_FIELDS

    type: Literal["function_call"]
    call_id: str
    name: str
    arguments: str

    @model_validator(mode="after")
    def _arguments_are_an_object(self) -> Self:
        arguments_object(self.arguments)
        return self


class FunctionCallOutputItem(RequestObject):
    """A tool's result, answering the call of `call_id`."""

    unserved = RESPONSES_OUTPUT_FIELDS

    type: Literal["function_call_output"]
    call_id: str
    output: str | list[ResponsesTextPart]

    @classmethod
    def served(cls, data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        """`data` after the content-part refusals, then the table's."""
        _text_parts(data.get("output"), f"{prefix}output.")
        return super().served(data, prefix)

    def text(self) -> str:
        """The output as one string."""
        return _joined(self.output)


class ReasoningText(RequestObject):
    """Reasoning as the model wrote it."""

    type: Literal["reasoning_text"]
    text: str


class ReasoningItem(RequestObject):
    """The model's reasoning before the assistant turn that follows it."""

    unserved = RESPONSES_REASONING_ITEM_FIELDS

    type: Literal["reasoning"]
    content: list[ReasoningText] | None = None

    def text(self) -> str:
        """The reasoning as one string."""
        return "".join(part.text for part in self.content or ())


InputItem = Annotated[
    MessageItem | FunctionCallItem | FunctionCallOutputItem | ReasoningItem, Field(discriminator="type")
]
_ITEM_MODELS: dict[str, type[RequestObject]] = {
    "message": MessageItem,
    "function_call": FunctionCallItem,
    "function_call_output": FunctionCallOutputItem,
    "reasoning": ReasoningItem,
}


class FunctionTool(FunctionDefinition):
    """A function the model may call (Responses spell a function tool flat: no `function` object)."""

    type: Literal["function"]

    def definition(self) -> FunctionDefinition:
        """The function as a chat tool's `function`."""
        return FunctionDefinition.model_construct(**self.model_dump(exclude={"type"}, exclude_unset=True))


class FunctionToolChoice(RequestObject):
    """`{"type": "function", "name": ...}`: the model must call this function."""

    type: Literal["function"]
    name: str


ResponsesToolChoice = Literal["none", "auto", "required"] | FunctionToolChoice


class TextFormat(RequestObject):
    """`text.format`: free text, any JSON object, or JSON matching a named schema (flat, unlike
    chat's `response_format`)."""

    unserved = JSON_SCHEMA_FORMAT_FIELDS

    type: Literal["text", "json_object", "json_schema"]
    name: Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")] | None = None
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class TextConfig(RequestObject):
    """`text`: the output's format."""

    unserved = RESPONSES_TEXT_FIELDS

    format: TextFormat | None = None


class ReasoningConfig(RequestObject):
    """`reasoning`: its effort, a thinking budget (`serve.http.thinking_budget`)."""

    unserved = RESPONSES_REASONING_FIELDS

    effort: ReasoningEffort | None = None


class ResponsesRequest(RequestObject):
    """POST /v1/responses."""

    unserved = RESPONSES_FIELDS

    model: str | None = None
    input: list[InputItem] | None = None  # a string is one user message
    instructions: str | None = None
    tools: list[FunctionTool] | None = None
    tool_choice: ResponsesToolChoice | None = None
    parallel_tool_calls: bool = True
    text: TextConfig | None = None
    max_output_tokens: Count | None = None
    temperature: Annotated[float, Field(ge=0.0, le=2.0, allow_inf_nan=False)] = 1.0
    top_p: Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)] = 1.0
    # Chat's sampling extensions (OpenAI's Responses has neither): the same output chat gives.
    seed: Int64 | None = None
    logit_bias: dict[str, LogitBias] | None = None
    reasoning: ReasoningConfig | None = None
    thinking_budget: Count | None = None  # tokens of reasoning before the server closes the think block
    stream: bool = False
    store: bool = True
    previous_response_id: str | None = None

    @classmethod
    def served(cls, data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        """`data` with its input as items (a string is one user message, and a message may leave
        its type out), after the refusals of items and tools this server does not serve, then
        the table's."""
        items = data.get("input")
        if isinstance(items, str):
            data = {**data, "input": [{"type": "message", "role": "user", "content": items}]}
        elif isinstance(items, list):
            data = {**data, "input": [_typed_item(item, f"{prefix}input.{i}.") for i, item in enumerate(items)]}
        tools = data.get("tools")
        if isinstance(tools, list):
            for i, tool in enumerate(tools):
                _check_tool_type(tool, f"{prefix}tools.{i}.type")
        choice = data.get("tool_choice")
        if isinstance(choice, Mapping):
            _check_tool_type(choice, f"{prefix}tool_choice.type")
        return super().served(data, prefix)

    @model_validator(mode="after")
    def _format_has_a_schema(self) -> Self:
        form = self.text.format if self.text is not None else None
        if form is not None and form.type == "json_schema" and (form.name is None or form.schema_ is None):
            raise refused_field("text.format", "type json_schema needs a name and a schema ({type, name, schema})")
        return self


def _typed_item(item: Any, prefix: str) -> Any:
    """The item with its type (a message may leave it out), checked by its type's model: a type
    this server does not read is refused by name, and an item its model refuses by the field
    (`prefix` + its path in the item) that model names first."""
    if not isinstance(item, Mapping):
        return item
    if item.get("type") is None and "role" in item:
        item = {**item, "type": "message"}
    kind = item.get("type")
    model = _ITEM_MODELS.get(kind) if isinstance(kind, str) else None
    if kind is None:
        raise refused_field(f"{prefix}type", f"an input item names its type; accepted: {', '.join(_ITEM_MODELS)}")
    if model is None:
        raise refused_field(
            f"{prefix}type",
            f"input item type {shown(kind)} is not supported here; accepted: {', '.join(_ITEM_MODELS)}",
        )
    try:
        model.model_validate(item)
    except ValidationError as err:
        raise _item_refusal(err, prefix) from None
    return item


# The members a union's validation error names in its path (`str`, `list[ResponsesTextPart]`).
_UNION_MEMBER = re.compile(r"^(str|[a-z-]+\[.*\])$")


def _item_refusal(err: ValidationError, prefix: str) -> PydanticCustomError:
    """An item's validation error as one refusal: the error at the deepest path (a union fails
    once per member; the deepest failure is the one that tells what is wrong), its path without
    the union members' names."""
    detail = max(err.errors(), key=lambda e: len(e["loc"]) + len(e.get("ctx", {}).get("field", "")))
    loc = [str(part) for part in detail["loc"] if not _UNION_MEMBER.match(str(part))]
    if detail["type"] == "refused_field":
        return refused_field(prefix + ".".join([*loc, detail["ctx"]["field"]]), detail["msg"])
    return refused_field(prefix + ".".join(loc), f"{detail['msg']} (got {shown(detail.get('input'))})")


def _check_tool_type(tool: Any, where: str) -> None:
    """Refuse a tool (or tool_choice) that is not a function: OpenAI's built-in tools by name."""
    kind = tool.get("type") if isinstance(tool, Mapping) else None
    if not isinstance(kind, str) or kind == "function":
        return
    if kind in BUILT_IN_TOOLS:
        raise refused_field(
            where,
            f"built-in tool {kind!r} is not supported here: this server runs none of OpenAI's built-in tools (it "
            f"would {BUILT_IN_TOOLS[kind]}); offer function tools (type 'function') and run them yourself",
        )
    raise refused_field(where, f"tool type {shown(kind)} is not supported here; accepted: 'function'")
