"""Which task each model endpoint serves, and the 400 for a request the served model's task
(model.task) does not: a chat completion to an embedding model, an embedding to a decoder."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import FastAPI, Request, Response

from config_bags.server import get_model
from serve.http.errors import bad_request
from serve.tokenizer.served_name import served_model_name

# The tasks each endpoint serves: /v1/score scores pairs with a cross-encoder, or compares two
# embeddings (vLLM's cosine similarity).
TASKS_OF_PATH: dict[str, tuple[str, ...]] = {
    "/v1/completions": ("generate",),
    "/v1/chat/completions": ("generate",),
    "/v1/responses": ("generate",),
    "/generate": ("generate",),
    "/v1/embeddings": ("embed",),
    "/v1/rerank": ("rerank",),
    "/rerank": ("rerank",),
    "/v1/score": ("rerank", "embed"),
    "/score": ("rerank", "embed"),
}


def install_task_routes(app: FastAPI) -> None:
    """Answer a request to an endpoint of another task than the served model's with a 400 naming both."""

    @app.middleware("http")
    async def task_guard(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        needed, served = TASKS_OF_PATH.get(request.url.path), get_model().task
        if request.method == "POST" and needed is not None and served is not None and served not in needed:
            tasks = " or ".join(repr(task) for task in needed)
            return bad_request(
                f"{request.url.path} serves task {tasks}, and model {served_model_name()!r} is served with task "
                f"{served!r} (--task); accepted here: the endpoints of task {served!r}",
                code="task_not_served",
            ).response()
        return await call_next(request)
