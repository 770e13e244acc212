"""The store of finished responses (`serve.http.responses_store`): bounded by
serving.max_stored_responses as read at each keep, least recently used dropped first, a missing
id a 404 naming it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import config_bags
from config_bags.server import Bags, ServingBag
from serve.http.errors import APIError
from serve.http.responses_request import MessageItem
from serve.http.responses_store import ResponseStore, StoredResponse


@pytest.fixture
def published() -> Iterator[None]:
    config_bags.publish(Bags(serving=ServingBag(max_stored_responses=2)), role="http")
    yield
    config_bags.unpublish()


def stored(rid: str) -> StoredResponse:
    return StoredResponse({"id": rid, "object": "response"}, (MessageItem(role="user", content=rid),))


def test_the_least_recently_used_is_dropped_beyond_the_limit(published: None) -> None:
    """Reverse-verified: with `get` not moving the response to the end, "a" was dropped instead
    of "b" and the first assertion of the second keep failed."""
    store = ResponseStore()
    store.keep(stored("a"))
    store.keep(stored("b"))
    assert store.get("a").conversation[0].text() == "a"  # "a" is now the most recently used
    store.keep(stored("c"))
    assert store.get("a").response["id"] == "a" and store.get("c").response["id"] == "c"
    with pytest.raises(APIError) as dropped:
        store.get("b", "previous_response_id")
    error = dropped.value
    assert error.status == 404 and error.param == "previous_response_id" and error.code == "previous_response_not_found"
    assert "'b'" in error.message and "serving.max_stored_responses (2)" in error.message


def test_the_limit_is_read_at_each_keep(published: None) -> None:
    store = ResponseStore()
    for rid in "abc":
        store.keep(stored(rid))
    config_bags.override("test", max_stored_responses=1)
    store.keep(stored("d"))
    assert store.get("d").response["id"] == "d"
    for rid in "bc":
        with pytest.raises(APIError):
            store.get(rid)


def test_delete_forgets_and_a_second_delete_is_a_404(published: None) -> None:
    store = ResponseStore()
    store.keep(stored("a"))
    store.delete("a")
    for call in (lambda: store.get("a"), lambda: store.delete("a")):
        with pytest.raises(APIError) as gone:
            call()
        assert gone.value.status == 404 and gone.value.code == "not_found"
