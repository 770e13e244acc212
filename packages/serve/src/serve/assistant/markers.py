"""Holding back text that may be the start of a marker (`<tool_call>`, `</think>`): its first
characters cannot be told from text until the rest arrives or the turn ends."""

from __future__ import annotations


def partial_marker(text: str, marker: str, start: int = 0) -> int:
    """The length of the longest proper prefix of `marker` that `text` ends with, within
    `text[start:]` (0 when none): the characters to hold back."""
    for size in range(min(len(marker) - 1, len(text) - start), 0, -1):
        if text.endswith(marker[:size]):
            return size
    return 0
