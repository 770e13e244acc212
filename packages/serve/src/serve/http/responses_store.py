"""The finished responses kept for `previous_response_id` and GET /v1/responses/{id}: in memory, at
most `serving.max_stored_responses` (read at each keep, so an override applies at the next), the
least recently used dropped first. A response keeps its conversation as items (the one it
continued, its input, its output), which a continuation sends again before its own input; the
items of a conversation are shared by every response along it, not copied."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from config_bags import get_serving
from serve.http.errors import APIError, shown
from serve.http.responses_request import InputItem


@dataclass(frozen=True)
class StoredResponse:
    """A finished response as answered, and its conversation up to its output."""

    response: Mapping[str, Any]
    conversation: tuple[InputItem, ...]


class ResponseStore:
    """The kept responses by id, least recently used first."""

    def __init__(self) -> None:
        self._kept: OrderedDict[str, StoredResponse] = OrderedDict()

    def keep(self, stored: StoredResponse) -> None:
        """Keep `stored` (the most recently used), dropping the least recently used beyond the limit."""
        rid = str(stored.response["id"])
        self._kept[rid] = stored
        self._kept.move_to_end(rid)
        while len(self._kept) > get_serving().max_stored_responses:
            self._kept.popitem(last=False)

    def get(self, rid: str, param: str | None = None) -> StoredResponse:
        """The response of id `rid` (now the most recently used); a 404 naming it when none is kept."""
        stored = self._kept.get(rid)
        if stored is None:
            raise not_stored(rid, param)
        self._kept.move_to_end(rid)
        return stored

    def delete(self, rid: str) -> None:
        """Forget the response of id `rid`; a 404 naming it when none is kept."""
        if self._kept.pop(rid, None) is None:
            raise not_stored(rid, None)


def not_stored(rid: str, param: str | None) -> APIError:
    """The 404 of a response id this server does not keep."""
    where = f"{param}: " if param else ""
    return APIError(
        404,
        f"{where}no response with id {shown(rid)} is stored here: it was never answered here, was made with "
        "store: false, was deleted, or was dropped as the least recently used beyond "
        f"serving.max_stored_responses ({get_serving().max_stored_responses})",
        param=param,
        code="previous_response_not_found" if param == "previous_response_id" else "not_found",
    )
