"""The adaptive rule: a request whose drafts keep being rejected stops speculating for a while.

A verify costs more than a decode (it computes 1 + k tokens), so speculation that is not accepted
slows the request down. Over the last `speculative_adaptive_window` verifies of a request, when
the fraction of its drafts accepted is below `speculative_adaptive_min_accept_rate`, it decodes
plainly for its next `speculative_adaptive_pause_steps` offers, then tries again with a fresh
window. The leaves are read at each decision, so an override applies to the next one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from config_bags import SpecBag, get_spec

from spec_workers.acceptance import accepted_count_of


def low_acceptance_of(recent: Sequence[tuple[int, int]], spec: SpecBag) -> bool:
    """Whether a full window of (drafted, accepted) verifies accepted too little to go on."""
    window = spec.speculative_adaptive_window
    if len(recent) < window:
        return False
    judged = list(recent)[-window:]
    drafted = sum(d for d, _ in judged)
    return drafted > 0 and sum(a for _, a in judged) / drafted < spec.speculative_adaptive_min_accept_rate


class _History:
    __slots__ = ("paused_for", "recent")

    def __init__(self) -> None:
        self.recent: deque[tuple[int, int]] = deque()
        self.paused_for = 0


class AcceptanceGate:
    """Per request: whether it speculates when offered, and the acceptance test with its record."""

    def __init__(self) -> None:
        self._histories: dict[str, _History] = {}

    def allows(self, rid: str) -> bool:
        """Whether request `rid` takes drafts at this offer (a paused request counts the offer down)."""
        history = self._histories.get(rid)
        if history is None or history.paused_for == 0:
            return True
        history.paused_for -= 1
        return False

    def verify(self, rid: str, drafts: Sequence[int], samples: Sequence[int]) -> int:
        """`accepted_count_of(drafts, samples)`, recorded in `rid`'s history; a window of low
        acceptance pauses the request."""
        accepted = accepted_count_of(drafts, samples)
        history = self._histories.setdefault(rid, _History())
        spec = get_spec()
        history.recent.append((len(drafts), accepted))
        while len(history.recent) > spec.speculative_adaptive_window:
            history.recent.popleft()
        if low_acceptance_of(history.recent, spec):
            history.paused_for = spec.speculative_adaptive_pause_steps
            history.recent.clear()
        return accepted

    def forget(self, rid: str) -> None:
        """Drop `rid`'s history (it left the scheduler)."""
        self._histories.pop(rid, None)

    @property
    def paused(self) -> int:
        """Requests pausing now."""
        return sum(1 for h in self._histories.values() if h.paused_for > 0)
