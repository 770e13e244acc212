"""The Response object of /v1/responses (OpenAI's shape): what the request asked for, echoed, beside
the response's status, output items and usage."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from serve.http.responses_request import FunctionToolChoice, ResponsesRequest
from serve.http.streams import ChoiceResult
from serve.tokenizer.served_name import served_model_name


def new_item_id(prefix: str) -> str:
    """A fresh id of a response (`resp`) or of an output item (`msg`, `fc`, `rs`)."""
    return f"{prefix}_{uuid.uuid4().hex}"


@dataclass(frozen=True)
class ResponseHead:
    """A response's id, creation time and model, and the request's fields it echoes."""

    echoed: dict[str, Any]
    id: str = field(default_factory=lambda: new_item_id("resp"))
    created_at: int = field(default_factory=lambda: int(time.time()))
    model: str = field(default_factory=served_model_name)

    @classmethod
    def of(cls, body: ResponsesRequest) -> ResponseHead:
        """The head of the response to `body`."""
        choice = body.tool_choice or ("auto" if body.tools else "none")
        form = body.text.format if body.text is not None and body.text.format is not None else None
        echoed = {
            "instructions": body.instructions,
            "max_output_tokens": body.max_output_tokens,
            "metadata": None,
            "parallel_tool_calls": body.parallel_tool_calls,
            "previous_response_id": body.previous_response_id,
            "reasoning": {"effort": body.reasoning.effort if body.reasoning else None, "summary": None},
            "store": body.store,
            "temperature": body.temperature,
            "text": {"format": {"type": "text"} if form is None else form.model_dump(by_alias=True, exclude_none=True)},
            "tool_choice": choice.model_dump() if isinstance(choice, FunctionToolChoice) else choice,
            "tools": [tool.model_dump(exclude_none=True) for tool in body.tools or ()],
            "top_p": body.top_p,
            "truncation": "disabled",
            "user": None,
        }
        return cls(echoed)

    def response(
        self,
        status: str,
        output: list[dict[str, Any]],
        usage: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """The Response object at `status` with `output` and its usage (None while it runs); an
        incomplete one ran out of tokens, which OpenAI reports as max_output_tokens."""
        return {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "error": None,
            "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
            "model": self.model,
            "output": output,
            "usage": usage,
            **self.echoed,
        }


def status_of(finish: str | None) -> str:
    """A finished response's status: "incomplete" when it ran out of tokens."""
    return "incomplete" if finish == "length" else "completed"


def response_usage(prompt_tokens: int, result: ChoiceResult) -> dict[str, Any]:
    """The usage of a response: the prompt's tokens (those the prefix cache held among them) and
    the output's. The reasoning's tokens are not counted apart from the answer's (the reasoning
    parser splits text, not tokens), so `reasoning_tokens` is 0."""
    return {
        "input_tokens": prompt_tokens,
        "input_tokens_details": {"cached_tokens": result.cached_tokens},
        "output_tokens": result.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt_tokens + result.completion_tokens,
    }
