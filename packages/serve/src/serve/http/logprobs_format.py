"""The logprobs fields of OpenAI's responses, from the detokenizer's entries."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from serve.ipc.messages import LogprobEntry


def completion_logprobs(entries: Sequence[LogprobEntry], offset: int = 0) -> dict[str, Any]:
    """The legacy completions shape: tokens, token_logprobs, top_logprobs, text_offset."""
    offsets: list[int] = []
    for entry in entries:
        offsets.append(offset)
        offset += len(entry.token)
    return {
        "tokens": [e.token for e in entries],
        "token_logprobs": [e.logprob for e in entries],
        "top_logprobs": [{text: lp for text, _id, lp in e.top} for e in entries],
        "text_offset": offsets,
    }


def chat_logprobs(entries: Sequence[LogprobEntry]) -> dict[str, Any]:
    """The chat shape: one content entry per token with its bytes and alternatives."""
    return {
        "content": [
            {
                "token": e.token,
                "logprob": e.logprob,
                "bytes": list(e.token.encode()),
                "top_logprobs": [
                    {"token": text, "logprob": lp, "bytes": list(text.encode())} for text, _id, lp in e.top
                ],
            }
            for e in entries
        ]
    }
