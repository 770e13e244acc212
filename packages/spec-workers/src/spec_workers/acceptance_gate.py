"""The adaptive rule: how many drafts a request takes at each offer, and when it stops speculating.

A verify costs more than a decode (it computes 1 + k tokens) and a draft model's drafts cost a
forward each, so drafts that are rejected slow a request down. Two rules keep that cost small:

- Draft length (`speculative_adaptive_draft_length`): a request takes the whole offer at first;
  after a verify that accepted all its d drafts it takes up to 2d at the next offer, after one that
  accepted a < d it takes a + 1. A request copying a long span drafts long, one writing new text
  drafts one token at a time, whose extra verify row is nearly free.
- Pause: over the last `speculative_adaptive_window` verifies of a request, when the fraction of
  its drafts accepted is below `speculative_adaptive_min_accept_rate`, it decodes plainly for its
  next `speculative_adaptive_pause_steps` offers, then tries again with a fresh window. Each window
  in a row judged low doubles the pause (up to 2**MAX_PAUSE_DOUBLINGS times the leaf); a window that
  is not low ends the streak.

The leaves are read at each decision, so an override applies to the next one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from config_bags.server import SpecBag, get_spec
from spec_workers.acceptance import accepted_count_of

MAX_PAUSE_DOUBLINGS = 3  # a request low window after window pauses at most 8x the leaf's steps


def low_acceptance_of(recent: Sequence[tuple[int, int]], spec: SpecBag) -> bool:
    """Whether a full window of (drafted, accepted) verifies accepted too little to go on."""
    window = spec.speculative_adaptive_window
    if len(recent) < window:
        return False
    judged = list(recent)[-window:]
    drafted = sum(d for d, _ in judged)
    return drafted > 0 and sum(a for _, a in judged) / drafted < spec.speculative_adaptive_min_accept_rate


def next_draft_length_of(drafted: int, accepted: int) -> int:
    """The drafts a request takes at its next offer after a verify of `drafted` that accepted
    `accepted`: twice as many after a full acceptance, one past the accepted ones otherwise."""
    return 2 * drafted if accepted == drafted else accepted + 1


class _History:
    __slots__ = ("length", "low_windows", "paused_for", "recent")

    def __init__(self) -> None:
        self.recent: deque[tuple[int, int]] = deque()
        self.paused_for = 0
        self.low_windows = 0  # windows judged low in a row
        self.length: int | None = None  # drafts to take at the next offer (None: the whole offer)


class AcceptanceGate:
    """Per request: how many drafts it takes when offered, and the acceptance test with its record."""

    def __init__(self) -> None:
        self._histories: dict[str, _History] = {}

    def drafts_for(self, rid: str, offered: int) -> int:
        """How many of the `offered` drafts request `rid` takes now: none while it pauses (the
        offer counts the pause down), else its draft length, at most `offered`."""
        history = self._histories.get(rid)
        if history is None or offered <= 0:
            return max(offered, 0)
        if history.paused_for > 0:
            history.paused_for -= 1
            return 0
        if history.length is None or not get_spec().speculative_adaptive_draft_length:
            return offered
        return min(offered, history.length)

    def verify(self, rid: str, drafts: Sequence[int], samples: Sequence[int]) -> int:
        """`accepted_count_of(drafts, samples)`, recorded in `rid`'s history: it sets the next draft
        length, and a window of low acceptance pauses the request."""
        accepted = accepted_count_of(drafts, samples)
        history = self._histories.setdefault(rid, _History())
        spec = get_spec()
        if drafts:
            history.length = next_draft_length_of(len(drafts), accepted)
        history.recent.append((len(drafts), accepted))
        while len(history.recent) > spec.speculative_adaptive_window:
            history.recent.popleft()
        if low_acceptance_of(history.recent, spec):
            history.paused_for = spec.speculative_adaptive_pause_steps * 2 ** min(
                history.low_windows, MAX_PAUSE_DOUBLINGS
            )
            history.low_windows += 1
            history.recent.clear()
        elif len(history.recent) == spec.speculative_adaptive_window:
            history.low_windows = 0
        return accepted

    def forget(self, rid: str) -> None:
        """Drop `rid`'s history (it left the scheduler)."""
        self._histories.pop(rid, None)

    @property
    def paused(self) -> int:
        """Requests pausing now."""
        return sum(1 for h in self._histories.values() if h.paused_for > 0)
