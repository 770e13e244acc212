"""The launcher: start the scheduler processes (each rank of each data-parallel replica) and the
detokenizer with the encoded bags, serve HTTP in this process once all are ready, and take
everything down together.

If a child dies while serving, in-flight requests get a 503, /health turns unhealthy, and after
a short grace period the server stops, the other children are terminated and `launch` returns 1.

With nnodes > 1 every node runs `serve` with the same flags but --node-rank: node 0 runs the
above with its share of the ranks; another node's launcher starts only its share (ranks that
take their messages from node 0's over torch.distributed), serves no HTTP, and ends, taking
its ranks down, when one of them dies (as they do once node 0 is gone) or it is interrupted.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import multiprocessing.connection
import shutil
import socket
import time
from collections.abc import Sequence
from multiprocessing.process import BaseProcess

import uvicorn

import config_bags
import config_bags.server
from config_bags.server import get_model, get_parallel, get_serving
from serve.child_process import Handover, configure_logging
from serve.detokenizer.process import run_detokenizer
from serve.http.app import create_app
from serve.ipc.channels import Addresses
from serve.launch_rules import launch_rules
from serve.process_names import DETOKENIZER
from serve.resolved_view import ResolvedConfig
from serve.scheduler_process.placement import RankPlacement, ranks_on_node
from serve.scheduler_process.process import run_scheduler
from serve.tokenizer.eos import eos_token_ids
from serve.tokenizer.loading import load_tokenizer
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.worker import TokenizerWorker

logger = logging.getLogger(__name__)

# How long /health answers "unhealthy" after a child died, before the server stops.
FAULT_GRACE_S = 2.0
_STOP_TIMEOUT_S = 5.0


def say(text: str) -> None:
    """One progress line for the operator on stdout."""
    print(f"serve: {text}", flush=True)


def start_children(
    handover: Handover, addresses: Addresses, ranks: Sequence[RankPlacement], *, detokenizer: bool
) -> dict[str, BaseProcess]:
    """Start a scheduler process for each of `ranks` and, with `detokenizer`, the detokenizer
    (spawned: no state shared but the handover), keyed by process name."""
    context = multiprocessing.get_context("spawn")
    children: dict[str, BaseProcess] = {}
    for placement in ranks:
        children[placement.name] = context.Process(
            target=run_scheduler, args=(handover, addresses, placement), name=f"serve-{placement.name}", daemon=True
        )
    if detokenizer:
        children[DETOKENIZER] = context.Process(
            target=run_detokenizer, args=(handover, addresses), name="serve-detokenizer", daemon=True
        )
    for child in children.values():
        child.start()
    return children


def stop_children(children: dict[str, BaseProcess]) -> None:
    """Terminate every child still running and wait for it (killing one that does not stop)."""
    for child in children.values():
        if child.is_alive():
            child.terminate()
    deadline = time.monotonic() + _STOP_TIMEOUT_S
    for child in children.values():
        child.join(max(0.0, deadline - time.monotonic()))
        if child.is_alive():
            child.kill()
            child.join()


class _Watch:
    """Which child died first, if any; set from the event loop's reader on the child's sentinel."""

    def __init__(self) -> None:
        self.dead: str | None = None
        self.event = asyncio.Event()

    def died(self, role: str, child: BaseProcess) -> None:
        if self.dead is None:
            child.join(1.0)  # the sentinel fires as the child exits; reap it for its exit code
            self.dead = f"the {role} process died (exit code {child.exitcode})"
            self.event.set()


async def _serve(resolved: ResolvedConfig, addresses: Addresses, children: dict[str, BaseProcess]) -> int:
    manager = TokenizerManager(eos_token_ids(load_tokenizer()), addresses)
    worker = TokenizerWorker()  # loads its tokenizer while the scheduler loads the model
    receiving = asyncio.create_task(manager.receive_forever())
    loop = asyncio.get_running_loop()
    watch = _Watch()
    for role, child in children.items():
        loop.add_reader(child.sentinel, watch.died, role, child)
    try:
        started = time.monotonic()
        ready = asyncio.create_task(manager.all_ready.wait())
        await asyncio.wait({ready, asyncio.create_task(watch.event.wait())}, return_when=asyncio.FIRST_COMPLETED)
        if watch.dead is not None:
            say(f"startup failed: {watch.dead}; see the log above")
            return 1
        say(f"model loaded in {time.monotonic() - started:.1f} s")
        # Serving before the tokenizer worker is up would hand the first requests a CPU it is still
        # loading on (about 20 s of it on a 2-core machine): their decode ran at half speed.
        tokenizer = asyncio.create_task(worker.started())
        await asyncio.wait({tokenizer, asyncio.create_task(watch.event.wait())}, return_when=asyncio.FIRST_COMPLETED)
        if watch.dead is not None:
            say(f"startup failed: {watch.dead}; see the log above")
            return 1
        if tokenizer.exception() is not None:
            say(f"startup failed: the tokenizer worker could not load the tokenizer: {tokenizer.exception()!r}")
            return 1
        config_bags.begin_serving()
        return await _run_http(resolved, manager, worker, watch)
    finally:
        for child in children.values():
            loop.remove_reader(child.sentinel)
        receiving.cancel()
        manager.close()
        worker.close()


async def _run_http(resolved: ResolvedConfig, manager: TokenizerManager, worker: TokenizerWorker, watch: _Watch) -> int:
    serving = get_serving()
    config = uvicorn.Config(
        create_app(manager, worker, resolved),
        host=serving.host,
        port=serving.port,
        log_config=None,  # the process's logging, which follows observability.log_level
        access_log=False,  # observability.log_requests is read per request by the tokenizer manager
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    server = uvicorn.Server(config)

    async def announce() -> None:
        while not server.started:
            await asyncio.sleep(0.05)
        say(f"ready at http://{serving.host}:{serving.port} (model {get_model().served_model_name})")

    async def on_fault() -> None:
        await watch.event.wait()
        logger.error("%s; failing in-flight requests and shutting down", watch.dead)
        manager.fail_all(watch.dead or "a server process died")
        await asyncio.sleep(FAULT_GRACE_S)
        server.should_exit = True

    helpers = [asyncio.create_task(announce()), asyncio.create_task(on_fault())]
    try:
        await server.serve()
    finally:
        for helper in helpers:
            helper.cancel()
    return 1 if watch.dead is not None else 0


def _rendezvous() -> str | None:
    """Where the torch.distributed world meets: parallel.dist_init_addr, else a free local port;
    None with tp_size 1 (no world)."""
    parallel = get_parallel()
    if parallel.dist_init_addr is not None or parallel.tp_size == 1:
        return parallel.dist_init_addr
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{probe.getsockname()[1]}"


def _run_other_node(children: dict[str, BaseProcess]) -> int:
    """A node other than 0: wait until one of its ranks ends (they end when node 0 goes); 1."""
    parallel = get_parallel()
    say(f"node {parallel.node_rank} of {parallel.nnodes}: running {', '.join(children)}; node 0 serves HTTP")
    ended = multiprocessing.connection.wait([child.sentinel for child in children.values()])
    dead = next(name for name, child in children.items() if child.sentinel in ended)
    children[dead].join(1.0)
    say(f"the {dead} process ended (exit code {children[dead].exitcode}); stopping this node")
    return 1


def launch(resolved: ResolvedConfig) -> int:
    """Serve `resolved` until interrupted or a process dies; the exit code (0 after a clean stop).

    Publishes the resolved bags under the launch's rules as the HTTP process (this process serves
    the API and tokenizes) if the caller has not, hands every child the encoded bags, and leaves
    no child process behind however it ends. On a node other than 0, starts only its ranks.
    """
    if not config_bags.is_published():
        config_bags.publish(resolved.bags(), role="http", rules=launch_rules(resolved.served_model))
    configure_logging("main")
    # The children keep OpenMP's default wait policy (spin briefly, then sleep). PASSIVE, once set
    # here, made every op of a step pay a thread wake-up (docs/benchmarks.md, serving).
    parallel = get_parallel()
    addresses = Addresses.fresh(parallel.dp_size)
    say(f"loading {get_model().model_path} (config hash {config_bags.config_hash()})")
    handover = Handover(
        bags=config_bags.encode(config_bags.published_root_unchecked(config_bags.server.Bags)),
        model=resolved.served_model,
    )
    node_zero = parallel.node_rank == 0
    children = start_children(handover, addresses, ranks_on_node(parallel, _rendezvous()), detokenizer=node_zero)
    try:
        return asyncio.run(_serve(resolved, addresses, children)) if node_zero else _run_other_node(children)
    except SystemExit as stop:  # uvicorn exits this way when it cannot bind
        return stop.code if isinstance(stop.code, int) else 1
    except KeyboardInterrupt:
        return 0
    finally:
        stop_children(children)
        shutil.rmtree(addresses.folder(), ignore_errors=True)
        say("stopped")
