"""The usage object of responses."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from serve.http.streams import ChoiceResult


def usage(prompt_lens: Sequence[int], results: Sequence[ChoiceResult]) -> dict[str, Any]:
    """Prompt tokens once per prompt, completion tokens of every choice, cached prompt tokens."""
    prompt = sum(prompt_lens)
    completion = sum(r.completion_tokens for r in results)
    cached = sum(r.cached_tokens for r in results)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }
