"""Operations endpoints: /health, /server_info, /metrics, /v1/models, /v1/runtime_config."""

from __future__ import annotations

import time
from typing import Annotated, Any

import msgspec
from fastapi import APIRouter, Body, Request
from fastapi.responses import JSONResponse, PlainTextResponse

import config_bags
import config_bags.server
from config_bags import ConfigError, config_hash, leaf_spec, leaf_value_of, overrides_log, published_role
from config_bags.server import Bags, get_observability
from runtime_scheduler import SchedulerMetrics
from serve.config_override import hot_leaf_names
from serve.http.errors import APIError, bad_request
from serve.metrics.speculative import speculative_summary
from serve.resolved_view import ResolvedConfig
from serve.tokenizer.manager import OverrideFailedError, TokenizerManager
from serve.tokenizer.served_name import served_model_name
from serve.tokenizer.worker import TokenizerWorker

router = APIRouter()


def _manager(request: Request) -> TokenizerManager:
    manager: TokenizerManager = request.app.state.manager
    return manager


def _worker(request: Request) -> TokenizerWorker:
    worker: TokenizerWorker = request.app.state.tokenizer_worker
    return worker


@router.get("/health")
async def health(request: Request) -> JSONResponse:
    """200 while every process (the tokenizer worker too) is up; 503 with the reason otherwise."""
    manager = _manager(request)
    worker_state = _worker(request).state()
    if manager.healthy and worker_state is None:
        return JSONResponse({"status": "ok"})
    return JSONResponse({"status": "unhealthy", "reason": manager.fault or worker_state or "starting"}, status_code=503)


@router.get("/v1/models")
async def models(request: Request) -> dict[str, Any]:
    """The one served model."""
    info = _manager(request).model_info
    return {
        "object": "list",
        "data": [
            {
                "id": served_model_name(),
                "object": "model",
                "created": int(time.time()),
                "owned_by": "serve",
                "max_model_len": info.context_length,
            }
        ],
    }


@router.get("/server_info")
async def server_info(request: Request) -> dict[str, Any]:
    """The config with provenance (hash and derived values as published now), the current bags,
    the overrides log, each process's role, pid and config hash, and the pool and queue state
    (server-wide, and each data-parallel replica's with the tokens the router counts outstanding there)."""
    manager = _manager(request)
    resolved: ResolvedConfig = request.app.state.resolved
    hashes = {"main": config_hash(), **manager.process_hashes}
    pids = {"main": request.app.state.pid, **manager.process_pids}
    # A child is keyed by the name it reported in its ProcessReady (serve.process_names).
    roles = {"main": published_role(), **manager.process_roles}
    role_checks = {"main": config_bags.ROLE_CHECK_MODE.value, **manager.process_role_checks}
    worker_pid = _worker(request).pid
    return {
        "config": resolved.dump(),
        "provenance": resolved.provenance(),
        "bags": msgspec.to_builtins(config_bags.published_root_unchecked(config_bags.server.Bags)),
        "overrides": msgspec.to_builtins(overrides_log()),
        "config_hashes": hashes,
        "pids": {**pids, **({} if worker_pid is None else {"tokenizer_worker": worker_pid})},
        "processes": {
            name: {
                "role": roles[name],
                "pid": pids.get(name),
                "config_hash": hashes[name],
                "role_check": role_checks.get(name),
            }
            for name in hashes
        },
        "pool_and_queue": _pool_and_queue(manager.metrics.scheduler),
        "replicas": _replicas(manager),
        "model": {"name": served_model_name(), **msgspec.to_builtins(manager.model_info)},
        "speculative": _speculative(manager),
        "structured_outputs": _structured_outputs(manager),
    }


def _structured_outputs(manager: TokenizerManager) -> dict[str, Any]:
    """The grammar engine constrained requests run on ("none": they are refused) and its figures."""
    stats = manager.metrics.scheduler
    figures = (
        {}
        if stats is None
        else {
            "compiles": stats.grammar_compiles,
            "cache_hits": stats.grammar_cache_hits,
            "compile_seconds": stats.grammar_compile_seconds,
            "waiting_for_grammar": stats.num_grammar_waiting,
        }
    )
    return {"grammar_backend": config_bags.server.get_serving().grammar_backend, **figures}


def _speculative(manager: TokenizerManager) -> dict[str, Any] | None:
    """Speculative decoding's algorithm and figures since start (None without speculation)."""
    algorithm = manager.model_info.speculative_algorithm
    stats = manager.metrics.scheduler
    if algorithm is None:
        return None
    return {"algorithm": algorithm, **(speculative_summary(stats) if stats is not None else {})}


def _replicas(manager: TokenizerManager) -> list[dict[str, Any]]:
    """Each data-parallel replica's pool and queues, and the tokens the router counts outstanding there."""
    outstanding = manager.router.outstanding()
    return [
        {
            "replica": replica,
            "outstanding_tokens": tokens,
            "pool_and_queue": _pool_and_queue(manager.metrics.replicas.get(replica)),
        }
        for replica, tokens in enumerate(outstanding)
    ]


def _pool_and_queue(stats: SchedulerMetrics | None) -> dict[str, int] | None:
    """The KV pool's pages and the scheduler's queues, as the last stats messages (sent a few times
    a second) gave them; None before the first."""
    if stats is None:
        return None
    return {
        "total_pages": stats.total_pages,
        "free_pages": stats.free_pages,
        "cached_pages": stats.cached_pages,
        "running": stats.num_running,
        "waiting": stats.num_waiting,
    }


@router.get("/metrics")
async def metrics(request: Request) -> PlainTextResponse:
    """Prometheus text exposition (404 when observability.enable_metrics is off)."""
    if not get_observability().enable_metrics:
        raise APIError(404, "metrics are disabled (observability.enable_metrics is false)", code="metrics_disabled")
    return PlainTextResponse(_manager(request).metrics.render(), media_type="text/plain; version=0.0.4")


@router.get("/v1/runtime_config")
async def runtime_config() -> dict[str, Any]:
    """The leaves that may change while serving, with their values, and the config hash."""
    leaves = {}
    shown = config_bags.published_root_unchecked(config_bags.server.Bags)  # every hot leaf, whatever http reads
    for name in hot_leaf_names():
        spec = leaf_spec(name, Bags)
        leaves[name] = {
            "value": msgspec.to_builtins(leaf_value_of(shown, name)),
            "bag": spec.namespace,
            "accepts": spec.accepts(),
            "help": spec.help,
        }
    return {"config_hash": config_hash(), "leaves": leaves}


@router.patch("/v1/runtime_config")
async def patch_runtime_config(request: Request, leaves: Annotated[dict[str, Any], Body()]) -> dict[str, Any]:
    """Apply `{leaf: value, ...}` in every process at a safe point; answers the new config hash once
    every process acknowledged it. A refused change is a 400 and changes nothing anywhere."""
    manager = _manager(request)
    try:
        new_hash = await manager.override(leaves, source="http:PATCH /v1/runtime_config")
    except ConfigError as err:
        raise bad_request(
            f"runtime config change refused: {err}", param=",".join(leaves) or None, code="config_refused"
        ) from None
    except OverrideFailedError as err:
        raise APIError(500, f"runtime config change failed: {err}", type_="server_error") from None
    return {
        "config_hash": new_hash,
        "config_hashes": {"main": config_hash(), **manager.process_hashes},
        "applied": leaves,
    }
