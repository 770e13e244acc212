"""A Responses request as the chat completion it runs as: its conversation (the stored one it
continues, then its input items) as chat messages, its instructions as the first system message,
its function tools, tool_choice and text format as chat's. The chat request's own checks (roles,
tool results answering calls, strict tools, lengths, constraints) then hold for Responses too, and
their refusals are renamed into the Responses request's fields (`ResponsesNames`).

Items become messages as OpenAI's conversation state holds them: a `reasoning` item opens an
assistant turn (its reasoning), an assistant message and the `function_call` items after it join
that turn (its content and calls), and every other item is a message of its own
(`function_call_output` a tool message answering its call).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from serve.http.errors import APIError, invalid_request
from serve.http.protocol import ChatCompletionRequest
from serve.http.responses_request import (
    FunctionCallItem,
    FunctionToolChoice,
    InputItem,
    MessageItem,
    ReasoningItem,
    ResponsesRequest,
    TextFormat,
)

# An item and where the request holds it (`input.3`, or `previous_response_id` for the stored ones).
SourcedItem = tuple[str, InputItem]

# Chat's field paths and the Responses fields they come from (the message paths are the items').
_RENAMES = (
    (re.compile(r"\btools\.(\d+)\.function\."), r"tools.\1."),
    (re.compile(r"\btool_choice\.function\.name\b"), "tool_choice.name"),
    (re.compile(r"\bresponse_format\.json_schema\.schema\b"), "text.format.schema"),
    (re.compile(r"\bresponse_format(\.json_schema)?\b"), "text.format"),
    (re.compile(r"\bmax_completion_tokens\b"), "max_output_tokens"),
    (re.compile(r"\breasoning_effort\b"), "reasoning.effort"),
)
_MESSAGE_PATH = re.compile(r"\bmessages\.(\d+)(\.tool_call_id\b)?")


@dataclass(frozen=True)
class ResponsesNames:
    """Renames a chat request's field paths into the Responses request's: `sources[k]` is where
    chat message k came from."""

    sources: tuple[str, ...]

    def renamed(self, err: APIError) -> APIError:
        """`err` with its message and param naming the Responses request's fields."""
        param = "input" if err.param == "messages" else None if err.param is None else self.path(err.param)
        return APIError(err.status, self.path(err.message), type_=err.type, param=param, code=err.code)

    def path(self, text: str) -> str:
        """`text` with every chat field path in it renamed."""

        def item(match: re.Match[str]) -> str:
            source = self.sources[int(match.group(1))]
            return source + (".call_id" if match.group(2) else "")

        text = _MESSAGE_PATH.sub(item, text)
        for pattern, name in _RENAMES:
            text = pattern.sub(name, text)
        return text


def chat_messages(items: Sequence[SourcedItem]) -> tuple[list[dict[str, Any]], list[str]]:
    """The chat messages of the conversation's items, and where each came from."""
    messages: list[dict[str, Any]] = []
    sources: list[str] = []
    turn: dict[str, Any] | None = None  # the assistant turn later items still join

    def add(message: dict[str, Any], where: str) -> dict[str, Any]:
        messages.append(message)
        sources.append(where)
        return message

    for where, item in items:
        if isinstance(item, ReasoningItem):
            turn = add({"role": "assistant", "content": None, "reasoning_content": item.text()}, where)
        elif isinstance(item, MessageItem) and item.role == "assistant":
            if turn is not None and turn["content"] is None and "tool_calls" not in turn:
                turn["content"] = item.text()
            else:
                turn = add({"role": "assistant", "content": item.text()}, where)
        elif isinstance(item, FunctionCallItem):
            if turn is None:
                turn = add({"role": "assistant", "content": None}, where)
            function = {"name": item.name, "arguments": item.arguments}
            turn.setdefault("tool_calls", []).append({"id": item.call_id, "type": "function", "function": function})
        elif isinstance(item, MessageItem):
            turn = None
            add({"role": item.role, "content": item.text()}, where)
        else:
            turn = None
            add({"role": "tool", "tool_call_id": item.call_id, "content": item.text()}, where)
    return messages, sources


def chat_request_of(
    body: ResponsesRequest, history: Sequence[InputItem]
) -> tuple[ChatCompletionRequest, ResponsesNames]:
    """The chat request `body` runs as, after the stored conversation `history`, and the renames
    of its refusals; refused (in the Responses request's names) as chat would refuse it."""
    items: list[SourcedItem] = [("previous_response_id", item) for item in history]
    items.extend((f"input.{i}", item) for i, item in enumerate(body.input or ()))
    messages, sources = chat_messages(items)
    if body.instructions is not None:
        messages.insert(0, {"role": "system", "content": body.instructions})
        sources.insert(0, "instructions")
    names = ResponsesNames(tuple(sources))
    if not messages:
        raise APIError(400, "input: empty; send input (a string, or a list of items)", param="input")
    chat: dict[str, Any] = {
        "model": body.model,
        "messages": messages,
        "max_completion_tokens": body.max_output_tokens,
        "temperature": body.temperature,
        "top_p": body.top_p,
        "seed": body.seed,
        "logit_bias": body.logit_bias,
        "parallel_tool_calls": body.parallel_tool_calls,
        "reasoning_effort": body.reasoning.effort if body.reasoning is not None else None,
        "thinking_budget": body.thinking_budget,
    }
    if body.tools:
        chat["tools"] = [{"type": "function", "function": tool.definition()} for tool in body.tools]
    if isinstance(body.tool_choice, FunctionToolChoice):
        chat["tool_choice"] = {"type": "function", "function": {"name": body.tool_choice.name}}
    elif body.tool_choice is not None:
        chat["tool_choice"] = body.tool_choice
    if body.text is not None and body.text.format is not None:
        chat["response_format"] = response_format_of(body.text.format)
    try:
        return ChatCompletionRequest.model_validate(chat), names
    except ValidationError as err:
        raise names.renamed(invalid_request(err.errors())) from None


def response_format_of(form: TextFormat) -> dict[str, Any]:
    """`text.format` as chat's `response_format`."""
    if form.type != "json_schema":
        return {"type": form.type}
    schema = {"name": form.name, "schema": form.schema_, "description": form.description, "strict": form.strict}
    return {"type": "json_schema", "json_schema": schema}
