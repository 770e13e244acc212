"""Rendering a conversation through the tokenizer's chat template."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


class NoChatTemplateError(ValueError):
    """The served tokenizer declares no chat template."""


def chat_prompt_ids(
    tokenizer: Any, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] = ()
) -> list[int]:
    """The prompt ids of `messages`, rendered with the tools offered (none: the template is
    given no tools) and the generation prompt appended."""
    if not getattr(tokenizer, "chat_template", None):
        raise NoChatTemplateError(
            "the served model's tokenizer has no chat template; use /v1/completions with a plain prompt"
        )
    text = tokenizer.apply_chat_template(
        [dict(m) for m in messages],
        tools=[dict(t) for t in tools] or None,
        add_generation_prompt=True,
        tokenize=False,
    )
    return list(tokenizer.encode(text, add_special_tokens=False))


def chat_template_text(tokenizer: Any) -> str | None:
    """The template a conversation with tools is rendered through (a tokenizer holding several
    names one "tool_use"); None when the tokenizer has none."""
    if not getattr(tokenizer, "chat_template", None):
        return None
    return str(tokenizer.get_chat_template(tools=[]))
