"""Token ids to text one step at a time, holding back pieces that end inside a multi-byte character."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

INCOMPLETE = "\ufffd"


class IncrementalText:
    """The text of a growing id sequence, released only once it no longer changes.

    Each step decodes the last released chunk together with the new ids, so that a token's
    leading space or byte-level merge renders as it would in a whole-sequence decode, and
    releases the difference; a piece ending in U+FFFD (half a UTF-8 character) waits for more ids.
    """

    def __init__(self, tokenizer: Any, skip_special_tokens: bool) -> None:
        self._tokenizer = tokenizer
        self._skip = skip_special_tokens
        self.ids: list[int] = []
        self._prefix_offset = 0  # ids[prefix:read] is the last released chunk
        self._read_offset = 0

    def _decode(self, ids: Sequence[int]) -> str:
        return str(self._tokenizer.decode(list(ids), skip_special_tokens=self._skip))

    def push(self, new_ids: Sequence[int]) -> str:
        """Append `new_ids`; the newly final text (empty while a character is still incomplete)."""
        self.ids.extend(new_ids)
        return self._release(final=False)

    def flush(self) -> str:
        """Whatever is still held back, at the end of a request, complete or not."""
        return self._release(final=True)

    def _release(self, final: bool) -> str:
        released = self._decode(self.ids[self._prefix_offset : self._read_offset])
        whole = self._decode(self.ids[self._prefix_offset :])
        if len(whole) <= len(released) or (whole.endswith(INCOMPLETE) and not final):
            return ""
        self._prefix_offset = self._read_offset
        self._read_offset = len(self.ids)
        return whole[len(released) :]
