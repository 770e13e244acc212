"""The FastAPI application: routes, error handlers, authentication and the body-size limit over one
tokenizer manager and one tokenizer worker."""

from __future__ import annotations

import os

from fastapi import FastAPI

from serve.http.auth import install_auth
from serve.http.body_limit import BodySizeLimit
from serve.http.errors import install_error_handlers
from serve.http.responses_store import ResponseStore
from serve.http.routes_admin import router as admin_router
from serve.http.routes_chat import router as chat_router
from serve.http.routes_completions import router as completions_router
from serve.http.routes_embeddings import router as embeddings_router
from serve.http.routes_native import router as native_router
from serve.http.routes_rerank import router as rerank_router
from serve.http.routes_responses import router as responses_router
from serve.http.routes_score import router as score_router
from serve.http.routes_web import install_web_ui
from serve.http.task_routes import install_task_routes
from serve.resolved_view import ResolvedConfig
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.worker import TokenizerWorker


def create_app(manager: TokenizerManager, worker: TokenizerWorker, resolved: ResolvedConfig) -> FastAPI:
    """The HTTP API served by the main process (the launcher starts `worker` early, so it loads its
    tokenizer while the scheduler loads the model)."""
    app = FastAPI(title="serve", description="OpenAI-compatible LLM server")
    app.state.manager = manager
    app.state.resolved = resolved
    app.state.pid = os.getpid()
    app.state.tokenizer_worker = worker
    app.state.responses = ResponseStore()
    install_error_handlers(app)
    install_task_routes(app)  # before auth: added later, auth runs first
    install_auth(app)
    app.add_middleware(BodySizeLimit)  # added last: outermost, so no body is read before its check
    for router in (
        completions_router,
        chat_router,
        responses_router,
        native_router,
        embeddings_router,
        rerank_router,
        score_router,
        admin_router,
    ):
        app.include_router(router)
    install_web_ui(app)
    return app
