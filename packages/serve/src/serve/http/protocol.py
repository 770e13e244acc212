"""Pydantic models of the requests the API accepts (OpenAI's shapes plus a few common extensions).

Field constraints here produce the 400s for wrong types and out-of-range values: every integer
fits a signed 64-bit int (what msgpack carries to the scheduler and a torch tensor holds) and
every float is finite. Limits that depend on the server (the vocabulary, the context length,
serving.max_n) are checked at admission (`serve.http.admission`). Every model is a
`RequestObject`: a field it does not declare is refused unless the table of
`serve.http.unserved_fields` accepts its value as one that changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal, Self

from pydantic import Field, model_validator

from serve.assistant.reasoning import EFFORT_BUDGETS
from serve.http.errors import refused_field, shown
from serve.http.request_object import RequestObject
from serve.http.structured_output_fields import ResponseFormat, StructuredOutputs
from serve.http.tool_fields import (
    Tool,
    ToolCall,
    ToolChoice,
    check_tool_choice,
    check_tool_results,
    check_tools,
)
from serve.http.unserved_fields import (
    CHAT_FIELDS,
    COMPLETION_FIELDS,
    GENERATE_FIELDS,
    MESSAGE_FIELDS,
    SAMPLING_FIELDS,
    STREAM_OPTION_FIELDS,
    TOKENIZE_FIELDS,
)

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)]
Count = Annotated[int, Field(ge=1, le=INT64_MAX)]
TokenId = Annotated[int, Field(ge=0, le=INT64_MAX)]
Probability = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Penalty = Annotated[float, Field(ge=-2.0, le=2.0, allow_inf_nan=False)]
TopLogprobs = Annotated[int, Field(ge=0, le=20)]
LogitBias = Annotated[float, Field(ge=-100.0, le=100.0, allow_inf_nan=False)]
ReasoningEffort = Literal["low", "medium", "high"]  # the keys of EFFORT_BUDGETS


class StreamOptions(RequestObject):
    """OpenAI's stream_options: whether a final chunk reports usage."""

    unserved = STREAM_OPTION_FIELDS

    include_usage: bool = False


class SamplingFields(RequestObject):
    """Sampling and stopping fields: /generate's sampling_params, and shared by completions and
    chat completions."""

    unserved = SAMPLING_FIELDS

    model: str | None = None
    max_tokens: Count | None = None
    max_new_tokens: Count | None = None  # the native spelling of max_tokens
    temperature: Annotated[float, Field(ge=0.0, le=2.0, allow_inf_nan=False)] = 1.0
    top_p: Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)] = 1.0
    top_k: Annotated[int, Field(ge=-1, le=INT64_MAX)] = -1
    min_p: Probability = 0.0
    n: Count = 1
    stop: str | list[str] | None = None
    stop_token_ids: list[TokenId] | None = None
    seed: Int64 | None = None
    presence_penalty: Penalty = 0.0
    frequency_penalty: Penalty = 0.0
    repetition_penalty: Annotated[float, Field(gt=0.0, allow_inf_nan=False)] = 1.0
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    logit_bias: dict[str, LogitBias] | None = None  # token id (as JSON keys are strings) -> bias
    # Structured output, SGLang's spelling: a JSON schema (an object, or its JSON text), a regex, an EBNF grammar.
    json_schema: dict[str, Any] | str | None = None
    regex: str | None = None
    ebnf: str | None = None
    # vLLM's spellings: its current object, and the older guided_* fields.
    structured_outputs: StructuredOutputs | None = None
    guided_json: dict[str, Any] | str | None = None
    guided_regex: str | None = None
    guided_choice: list[str] | None = None
    guided_grammar: str | None = None

    def stop_strings(self) -> tuple[str, ...]:
        """The stop strings as a tuple (a single string is one stop)."""
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)

    def length_fields(self) -> dict[str, int]:
        """The completion-length fields the client sent, by the name it used."""
        given = {"max_tokens": self.max_tokens, "max_new_tokens": self.max_new_tokens}
        return {name: value for name, value in given.items() if value is not None}


class OpenAIRequest(SamplingFields):
    """The fields completions and chat completions share beyond sampling: streaming."""

    stream: bool = False
    stream_options: StreamOptions | None = None
    response_format: ResponseFormat | None = None

    @model_validator(mode="after")
    def _usage_chunk_needs_a_stream(self) -> Self:
        if not self.stream and self.stream_options is not None and self.stream_options.include_usage:
            raise refused_field(
                "stream_options",
                "include_usage adds a usage chunk to a stream, and this request is not streamed (its answer carries "
                "usage anyway); send stream: true, or no stream_options",
            )
        return self


class CompletionRequest(OpenAIRequest):
    """POST /v1/completions."""

    unserved = COMPLETION_FIELDS

    prompt: str | list[str] | list[TokenId] | list[list[TokenId]]
    logprobs: TopLogprobs | None = None


class TextPart(RequestObject):
    """A text part of a message's content."""

    type: Literal["text"]
    text: str


def _text_part(part: Any, prefix: str) -> Any:
    """A content part, checked as a text part: another part type is refused by its name (a
    text-only model), an undeclared field of a text part by the table."""
    if not isinstance(part, Mapping):
        return part
    kind = part.get("type")
    if isinstance(kind, str) and kind != "text":
        raise refused_field(
            f"{prefix}type",
            f"content part type {shown(kind)} is not supported here: this server serves a text-only model; "
            "send the content as a string or as parts of type 'text'",
        )
    return TextPart.served(part, prefix)


class ChatMessage(RequestObject):
    """One message of a conversation, as the chat template is given it: a role and a text, an
    assistant turn's tool calls and reasoning, a tool result's call id.

    A `developer` message (OpenAI's newer name for a system message) is rendered as `system`,
    the role the templates of the served models know. Refused: content parts other than text (a
    text-only model); tool calls on a message that is not the assistant's, a tool result without
    the id of the call it answers (or an id on another role), reasoning on a message that is not
    the assistant's (sent as `reasoning_content` or `reasoning`, the names clients use; both only
    when the same), and a tool result without content."""

    unserved = MESSAGE_FIELDS

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    reasoning_content: str | None = None
    reasoning: str | None = None  # the other name clients send an assistant's reasoning by

    @classmethod
    def served(cls, data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        """`data` after the content-part refusals, then the table's."""
        content = data.get("content")
        if isinstance(content, list):
            data = {**data, "content": [_text_part(part, f"{prefix}content.{i}.") for i, part in enumerate(content)]}
        return super().served(data, prefix)

    @model_validator(mode="after")
    def _fields_of_its_role(self) -> Self:
        if self.tool_calls and self.role != "assistant":
            raise refused_field("tool_calls", f"only an assistant message carries tool calls; this one is {self.role}")
        for name, given in (("reasoning_content", self.reasoning_content), ("reasoning", self.reasoning)):
            if given is not None and self.role != "assistant":
                raise refused_field(name, f"only an assistant message carries reasoning; this one is {self.role}")
        if None not in (self.reasoning_content, self.reasoning) and self.reasoning_content != self.reasoning:
            raise refused_field(
                "reasoning",
                "differs from reasoning_content (two names of the one reasoning the template renders); send one of "
                "them, or both the same",
            )
        if self.role == "tool" and self.tool_call_id is None:
            raise refused_field("tool_call_id", "a tool message answers a call: send the id of the call it answers")
        if self.role != "tool" and self.tool_call_id is not None:
            raise refused_field("tool_call_id", f"only a tool message answers a call; this one is {self.role}")
        if self.role == "tool" and self.content is None:
            raise refused_field("content", "a tool message carries the tool's result: send it as content")
        return self

    def text(self) -> str:
        """The message's content as one string."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)

    def template_message(self) -> dict[str, Any]:
        """The message as the chat template is given it: role and content, and the assistant's
        calls (arguments parsed) and reasoning, or the tool result's call id, where sent."""
        message: dict[str, Any] = {"role": "system" if self.role == "developer" else self.role, "content": self.text()}
        if self.tool_calls:
            message["tool_calls"] = [call.template_call() for call in self.tool_calls]
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        reasoning = self.reasoning_content if self.reasoning_content is not None else self.reasoning
        if reasoning is not None:
            message["reasoning_content"] = reasoning
        return message


class ChatCompletionRequest(OpenAIRequest):
    """POST /v1/chat/completions."""

    unserved = CHAT_FIELDS

    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    max_completion_tokens: Count | None = None
    logprobs: bool = False
    top_logprobs: TopLogprobs | None = None
    tools: list[Tool] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool = True
    reasoning_effort: ReasoningEffort | None = None
    thinking_budget: Count | None = None  # tokens of reasoning before the server closes the think block

    @model_validator(mode="after")
    def _one_thinking_budget(self) -> Self:
        if self.reasoning_effort is not None and self.thinking_budget is not None:
            raise refused_field(
                "thinking_budget",
                f"reasoning_effort {self.reasoning_effort!r} is a thinking budget too "
                f"({EFFORT_BUDGETS[self.reasoning_effort]} tokens); send one of them",
            )
        return self

    def thinking_tokens(self) -> tuple[int, str] | None:
        """(the thinking budget in tokens, the field that asked for it), None when none did."""
        if self.thinking_budget is not None:
            return self.thinking_budget, "thinking_budget"
        if self.reasoning_effort is not None:
            return EFFORT_BUDGETS[self.reasoning_effort], "reasoning_effort"
        return None

    @model_validator(mode="after")
    def _top_logprobs_needs_logprobs(self) -> Self:
        if self.top_logprobs and not self.logprobs:
            raise refused_field(
                "top_logprobs",
                f"top_logprobs={self.top_logprobs} returns nothing without logprobs: true; send logprobs: true, or "
                "top_logprobs 0 or null",
            )
        return self

    @model_validator(mode="after")
    def _tools_agree(self) -> Self:
        check_tools(self.tools or ())
        check_tool_choice(self.tools or (), self.chosen_tools())
        check_tool_results(self.messages)
        return self

    def chosen_tools(self) -> ToolChoice:
        """The tool_choice sent, else OpenAI's default: "auto" when tools are offered, "none" when not."""
        if self.tool_choice is not None:
            return self.tool_choice
        return "auto" if self.tools else "none"

    def length_fields(self) -> dict[str, int]:
        """The completion-length fields the client sent (max_completion_tokens is OpenAI's
        current name for max_tokens), by the name it used."""
        given = super().length_fields()
        if self.max_completion_tokens is not None:
            given = {"max_completion_tokens": self.max_completion_tokens, **given}
        return given


class GenerateBody(RequestObject):
    """POST /generate (native): text or token ids, and sampling parameters in one object."""

    unserved = GENERATE_FIELDS

    text: str | None = None
    input_ids: list[TokenId] | None = None
    sampling_params: SamplingFields = Field(default_factory=SamplingFields)
    stream: bool = False
    return_logprob: bool = False
    top_logprobs_num: TopLogprobs = 0


class TokenizeBody(RequestObject):
    """POST /tokenize: a prompt, or chat messages (and the tools offered) rendered through the chat
    template."""

    unserved = TOKENIZE_FIELDS

    model: str | None = None
    prompt: str | None = None
    messages: list[ChatMessage] | None = None
    tools: list[Tool] | None = None
    add_special_tokens: bool = True

    @model_validator(mode="after")
    def _tools_render_with_messages(self) -> Self:
        if self.tools and self.messages is None:
            raise refused_field("tools", "tools are rendered into the chat template with messages; send messages")
        if self.messages is not None:
            check_tools(self.tools or ())
            check_tool_results(self.messages)
        return self

    @model_validator(mode="after")
    def _messages_add_no_special_tokens(self) -> Self:
        if self.messages is not None and self.add_special_tokens and "add_special_tokens" in self.model_fields_set:
            raise refused_field(
                "add_special_tokens",
                "true is not supported with messages: the chat template writes its special tokens itself and its text "
                "is encoded without added ones; send false, or leave it out",
            )
        return self


class DetokenizeBody(RequestObject):
    """POST /detokenize."""

    model: str | None = None
    tokens: list[TokenId]
