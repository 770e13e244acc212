"""The web UI's routes on a real FastAPI app with the server's auth and error handlers: the pages
and their files are public (a browser's navigation carries no key), every API route still needs
the key, and serving.web_ui off leaves / and /dashboard the 404 of a route that is not here."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

import config_bags
from config_bags.server import Bags, ServingBag
from serve.http.auth import install_auth
from serve.http.errors import install_error_handlers
from serve.http.routes_web import install_web_ui


def _client(serving: ServingBag) -> Iterator[TestClient]:
    config_bags.publish(Bags(serving=serving), role="http")
    app = FastAPI()
    install_error_handlers(app)
    install_auth(app)

    @app.get("/v1/models")
    async def models() -> dict[str, str]:
        return {"object": "list"}

    install_web_ui(app)
    try:
        with TestClient(app) as client:
            yield client
    finally:
        config_bags.unpublish()


@pytest.fixture
def keyed() -> Iterator[TestClient]:
    yield from _client(ServingBag(api_key="k"))


@pytest.fixture
def without_web_ui() -> Iterator[TestClient]:
    yield from _client(ServingBag(web_ui=False))


def test_the_pages_and_their_files_are_served_without_the_key(keyed: TestClient) -> None:
    """Reverse-verified: without the web paths in auth's open paths, each of these was a 401."""
    chat = keyed.get("/")
    assert chat.status_code == 200 and chat.headers["content-type"].startswith("text/html")
    assert '<script type="module" src="/web/js/chat.js">' in chat.text
    assert "script-src 'self'" in chat.headers["content-security-policy"]
    dashboard = keyed.get("/dashboard")
    assert dashboard.status_code == 200 and "/web/js/dashboard.js" in dashboard.text
    script = keyed.get("/web/js/chat.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert script.headers["cache-control"] == "no-cache"
    assert keyed.get("/web/vendor/marked/LICENSE").status_code == 200


def test_the_api_still_needs_the_key(keyed: TestClient) -> None:
    assert keyed.get("/v1/models").status_code == 401
    assert keyed.get("/v1/models", headers={"Authorization": "Bearer k"}).status_code == 200
    assert keyed.get("/web/no-such-file.js").status_code == 404


def test_no_web_ui_serves_neither_page(without_web_ui: TestClient) -> None:
    """Reverse-verified: with install_web_ui ignoring the leaf, / answered 200."""
    for path in ("/", "/dashboard", "/web/js/chat.js"):
        response = without_web_ui.get(path)
        assert response.status_code == 404, path
        assert path in response.json()["error"]["message"]
    assert without_web_ui.get("/v1/models").status_code == 200
