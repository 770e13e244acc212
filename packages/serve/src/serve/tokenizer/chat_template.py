"""Rendering a conversation through the tokenizer's chat template."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class NoChatTemplateError(ValueError):
    """The served tokenizer declares no chat template."""


def chat_prompt_ids(tokenizer: Any, messages: Sequence[dict[str, str]]) -> list[int]:
    """The prompt ids of `messages`, rendered with the generation prompt appended."""
    if not getattr(tokenizer, "chat_template", None):
        raise NoChatTemplateError(
            "the served model's tokenizer has no chat template; use /v1/completions with a plain prompt"
        )
    text = tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)
    return list(tokenizer.encode(text, add_special_tokens=False))
