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

from pydantic import TypeAdapter, ValidationError

from config_bags.server import get_serving
from serve.http.errors import APIError, shown
from serve.http.responses_request import InputItem

_ITEMS = TypeAdapter(list[InputItem])


@dataclass(frozen=True)
class StoredResponse:
    """A finished response as answered, and its conversation up to its output (None where the
    output cannot be sent again: a function call cut short, whose arguments are not JSON)."""

    response: Mapping[str, Any]
    conversation: tuple[InputItem, ...] | None

    @classmethod
    def of(
        cls, response: Mapping[str, Any], conversation: tuple[InputItem, ...], output: list[dict[str, Any]]
    ) -> StoredResponse:
        """`response`, answered to `conversation` with the items `output`."""
        try:
            return cls(response, (*conversation, *_ITEMS.validate_python(output)))
        except ValidationError:
            return cls(response, None)


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

    def conversation(self, rid: str) -> tuple[InputItem, ...]:
        """The conversation a continuation of `rid` sends again before its own input: a 404 naming
        previous_response_id when none is kept, a 400 when its output ended in a call cut short."""
        conversation = self.get(rid, "previous_response_id").conversation
        if conversation is None:
            raise APIError(
                400,
                f"previous_response_id: the response {shown(rid)} ended inside a function call cut short (its "
                "arguments are not JSON: max_output_tokens ran out), so it cannot be continued; continue from a "
                "complete response, or send the conversation as input items",
                param="previous_response_id",
            )
        return conversation

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
