"""Pydantic models of the requests the API accepts (OpenAI's shapes plus a few common extensions).

Field constraints here produce the 400s for wrong types and out-of-range values: every integer
fits a signed 64-bit int (what msgpack carries to the scheduler and a torch tensor holds) and
every float is finite. Limits that depend on the server (the vocabulary, the context length,
serving.max_n) are checked at admission (`serve.http.admission`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

Int64 = Annotated[int, Field(ge=INT64_MIN, le=INT64_MAX)]
Count = Annotated[int, Field(ge=1, le=INT64_MAX)]
TokenId = Annotated[int, Field(ge=0, le=INT64_MAX)]
Probability = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
Penalty = Annotated[float, Field(ge=-2.0, le=2.0, allow_inf_nan=False)]
TopLogprobs = Annotated[int, Field(ge=0, le=20)]


class StreamOptions(BaseModel):
    """OpenAI's stream_options: whether a final chunk reports usage."""

    include_usage: bool = False


class SamplingFields(BaseModel):
    """Sampling and stopping fields shared by completions and chat completions."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    max_tokens: Count | None = None
    max_new_tokens: Count | None = None  # the native spelling of max_tokens
    temperature: Annotated[float, Field(ge=0.0, le=2.0, allow_inf_nan=False)] = 1.0
    top_p: Annotated[float, Field(gt=0.0, le=1.0, allow_inf_nan=False)] = 1.0
    top_k: Annotated[int, Field(ge=-1, le=INT64_MAX)] = -1
    min_p: Probability = 0.0
    n: Count = 1
    stream: bool = False
    stream_options: StreamOptions | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[TokenId] | None = None
    seed: Int64 | None = None
    presence_penalty: Penalty = 0.0
    frequency_penalty: Penalty = 0.0
    repetition_penalty: Annotated[float, Field(gt=0.0, allow_inf_nan=False)] = 1.0
    ignore_eos: bool = False
    skip_special_tokens: bool = True

    def stop_strings(self) -> tuple[str, ...]:
        """The stop strings as a tuple (a single string is one stop)."""
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)

    def length_fields(self) -> dict[str, int]:
        """The completion-length fields the client sent, by the name it used."""
        given = {"max_tokens": self.max_tokens, "max_new_tokens": self.max_new_tokens}
        return {name: value for name, value in given.items() if value is not None}


class CompletionRequest(SamplingFields):
    """POST /v1/completions."""

    prompt: str | list[str] | list[TokenId] | list[list[TokenId]]
    logprobs: TopLogprobs | None = None


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
    max_completion_tokens: Count | None = None
    logprobs: bool = False
    top_logprobs: TopLogprobs | None = None

    def length_fields(self) -> dict[str, int]:
        """The completion-length fields the client sent (max_completion_tokens is OpenAI's
        current name for max_tokens), by the name it used."""
        given = super().length_fields()
        if self.max_completion_tokens is not None:
            given = {"max_completion_tokens": self.max_completion_tokens, **given}
        return given


class GenerateBody(BaseModel):
    """POST /generate (native): text or token ids, and sampling parameters in one object."""

    model_config = ConfigDict(extra="forbid")

    text: str | None = None
    input_ids: list[TokenId] | None = None
    sampling_params: SamplingFields = Field(default_factory=SamplingFields)
    stream: bool = False
    return_logprob: bool = False
    top_logprobs_num: TopLogprobs = 0


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
