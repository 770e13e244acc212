"""Stop strings over streamed text: find the first match, and hold back a tail that might begin one."""

from __future__ import annotations

from collections.abc import Sequence


class StopMatch:
    """Where a request's text stops, and how much of it is safe to release."""

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = tuple(s for s in stops if s)

    def first_match(self, text: str, start: int) -> tuple[int, str] | None:
        """(position, stop string) of the earliest stop string in `text` at or after `start`."""
        best: tuple[int, str] | None = None
        for stop in self.stops:
            pos = text.find(stop, start)
            if pos != -1 and (best is None or pos < best[0]):
                best = (pos, stop)
        return best

    def safe_end(self, text: str) -> int:
        """The end of the text that no stop string can still claim: everything before the
        longest tail of `text` that is a proper prefix of some stop string."""
        held = 0
        for stop in self.stops:
            for size in range(min(len(stop) - 1, len(text)), held, -1):
                if text.endswith(stop[:size]):
                    held = size
                    break
        return len(text) - held
