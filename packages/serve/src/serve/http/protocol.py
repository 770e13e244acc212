"""Pydantic models of the requests the API accepts (OpenAI's shapes plus a few common extensions).

Field constraints here produce the 400s for wrong types and out-of-range values; limits that
depend on the server (context length, serving.max_n) are checked by the handlers.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

Probability = Annotated[float, Field(ge=0.0, le=1.0)]
Penalty = Annotated[float, Field(ge=-2.0, le=2.0)]
TokenId = Annotated[int, Field(ge=0)]


class StreamOptions(BaseModel):
    """OpenAI's stream_options: whether a final chunk reports usage."""

    include_usage: bool = False


class SamplingFields(BaseModel):
    """Sampling and stopping fields shared by completions and chat completions."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    max_tokens: Annotated[int, Field(ge=1)] | None = Field(default=None, validation_alias=AliasChoices("max_tokens", "max_new_tokens"))
    temperature: Annotated[float, Field(ge=0.0, le=2.0)] = 1.0
    top_p: Annotated[float, Field(gt=0.0, le=1.0)] = 1.0
    top_k: Annotated[int, Field(ge=-1)] = -1
    min_p: Probability = 0.0
    n: Annotated[int, Field(ge=1)] = 1
    stream: bool = False
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[TokenId] | None = None
    seed: int | None = None
    presence_penalty: Penalty = 0.0
    frequency_penalty: Penalty = 0.0
    repetition_penalty: Annotated[float, Field(gt=0.0)] = 1.0
    ignore_eos: bool = False
    skip_special_tokens: bool = True

    def stop_strings(self) -> tuple[str, ...]:
        """The stop strings as a tuple (a single string is one stop)."""
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)


class CompletionRequest(SamplingFields):
    """POST /v1/completions."""

    prompt: str | list[str] | list[TokenId] | list[list[TokenId]]
    logprobs: Annotated[int, Field(ge=0, le=20)] | None = None


class TextPart(BaseModel):
    """A text part of a message's content."""

    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    """One message of a conversation."""

    model_config = ConfigDict(extra="allow")

    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None

    def text(self) -> str:
        """The message's content as one string."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class ChatCompletionRequest(SamplingFields):
    """POST /v1/chat/completions."""

    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    logprobs: bool = False
    top_logprobs: Annotated[int, Field(ge=0, le=20)] | None = None


class GenerateBody(BaseModel):
    """POST /generate (native): text or token ids, and sampling parameters in one object."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = None
    input_ids: list[TokenId] | None = None
    sampling_params: SamplingFields = Field(default_factory=SamplingFields)
    stream: bool = False
    return_logprob: bool = False
    top_logprobs_num: Annotated[int, Field(ge=0, le=20)] = 0


class TokenizeBody(BaseModel):
    """POST /tokenize: a prompt, or chat messages rendered through the chat template."""

    model: str | None = None
    prompt: str | None = None
    messages: list[ChatMessage] | None = None
    add_special_tokens: bool = True


class DetokenizeBody(BaseModel):
    """POST /detokenize."""

    model: str | None = None
    tokens: list[TokenId]
