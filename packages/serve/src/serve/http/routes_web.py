"""The browser pages: the chat page at /, the dashboard at /dashboard and their scripts, styles and
vendored libraries under /web/, all files shipped inside the package (serve/web/); none of them
when serving.web_ui is off (--no-web-ui).

The pages are public files, the same for every install, holding nothing of the server's: a
browser's navigation to / cannot carry an Authorization header, so the key the user types is kept
by the page and sent with each API call the page makes, and the API key still guards every route
that answers with data (see serve.http.auth)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response
from starlette.staticfiles import PathLike
from starlette.types import Scope

from config_bags.server import get_serving

WEB_ROOT = Path(__file__).resolve().parent.parent / "web"
ASSETS_PREFIX = "/web/"
PAGES = {"/": "chat.html", "/dashboard": "dashboard.html"}

# The pages run only their own files and talk only to this server: a model's answer that slipped
# past the sanitizer could still not load or run a script from elsewhere.
PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
    ),
    "Cache-Control": "no-cache",
}


def is_web_ui_path(path: str) -> bool:
    """Whether `path` is one of the pages' public files (while the web UI is on)."""
    return get_serving().web_ui and (path in PAGES or path.startswith(ASSETS_PREFIX))


def _page_endpoint(file_name: str) -> Callable[[], Awaitable[FileResponse]]:
    async def page() -> FileResponse:
        return FileResponse(WEB_ROOT / file_name, media_type="text/html", headers=PAGE_HEADERS)

    return page


class _RevalidatedFiles(StaticFiles):
    """The pages' files, each asked for again (answered 304 while unchanged): after an upgrade of
    serve, a browser must not run an old script under a new page."""

    def file_response(
        self, full_path: PathLike, stat_result: os.stat_result, scope: Scope, status_code: int = 200
    ) -> Response:
        response = super().file_response(full_path, stat_result, scope, status_code)
        response.headers["Cache-Control"] = "no-cache"
        return response


def install_web_ui(app: FastAPI) -> None:
    """Add the pages' routes to `app`, unless serving.web_ui is off (then / and /dashboard are the 404
    of any route that is not here)."""
    if not get_serving().web_ui:
        return
    for path, file_name in PAGES.items():
        app.add_api_route(path, _page_endpoint(file_name), methods=["GET"], include_in_schema=False)
    app.mount(ASSETS_PREFIX.rstrip("/"), _RevalidatedFiles(directory=WEB_ROOT), name="web")
