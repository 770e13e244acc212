"""A standalone runner per rank of a tensor-parallel group, each rank in its own spawned process
(over gloo, or NCCL with a CUDA device per rank), for tests that hold a split model to the whole
one: every rank publishes the same bags (with parallel.tp_size), builds the real ModelRunner over
its rank's group, and steps the same prompts greedily, answering its tokens and its logits at
every step."""

from __future__ import annotations

import multiprocessing
import queue
import time
from collections.abc import Sequence

import msgspec

from serve_testing.server import free_port


class RunnerCase(msgspec.Struct, frozen=True, kw_only=True):
    """One runner to build and step: a checkpoint, and whether deterministic inference is on
    (the rank-ordered sum) or off (torch.distributed's all_reduce)."""

    model_path: str
    deterministic: bool


class GreedyRun(msgspec.Struct, frozen=True, kw_only=True):
    """What one runner produced: each prompt's greedy tokens, and the fp32 logits of every step
    ([step][request][vocab])."""

    tokens: list[list[int]]
    logits: list[list[list[float]]]


def greedy_run(
    case: RunnerCase, prompts: Sequence[Sequence[int]], steps: int, tp_size: int, group: object = None
) -> GreedyRun:
    """Publish the bags of `case` (tp_size ranks, fp32, a small pool), build the runner (over
    `group`, this rank's torch.distributed group, when tp_size > 1), and step every prompt
    together `steps` times (a prefill, then decodes)."""
    import config_bags
    from attn_backends import build_attention_pair
    from config_bags.server import Bags, ExecBag, KernelBag, MemoryBag, ModelBag, ParallelBag, ScheduleBag
    from runtime_runner.runner import ModelRunner
    from runtime_runner.standalone import StandaloneDriver

    config_bags.unpublish()
    config_bags.publish(
        Bags(
            model=ModelBag(model_path=case.model_path, dtype="float32"),
            parallel=ParallelBag(tp_size=tp_size),
            memory=MemoryBag(max_total_tokens=1024),
            schedule=ScheduleBag(chunked_prefill_size=256, max_prefill_tokens=256),
            exec=ExecBag(kernel=KernelBag(enable_deterministic_inference=case.deterministic)),
        ),
        role="standalone",
    )
    try:
        runner = ModelRunner(build_attention_pair, tensor_parallel_group=group)  # type: ignore[arg-type]
        driver = StandaloneDriver(runner)
        running = [driver.add(prompt) for prompt in prompts]
        logits = [driver.step().logits.tolist() for _ in range(steps)]
        return GreedyRun(tokens=[seq.output for seq in running], logits=logits)
    finally:
        config_bags.unpublish()


def _rank_main(
    rank: int,
    tp_size: int,
    backend: str,
    init_addr: str,
    cases: list[RunnerCase],
    prompts: list[list[int]],
    steps: int,
    results: multiprocessing.Queue[tuple[int, bytes]],
) -> None:
    import torch
    import torch.distributed as dist

    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"tcp://{init_addr}", world_size=tp_size, rank=rank)
    runs = [greedy_run(case, prompts, steps, tp_size, dist.group.WORLD) for case in cases]
    results.put((rank, msgspec.msgpack.encode(runs)))
    dist.destroy_process_group()


def run_ranks(
    cases: Sequence[RunnerCase],
    prompts: Sequence[Sequence[int]],
    steps: int,
    tp_size: int,
    *,
    backend: str = "gloo",
    timeout_s: float = 300.0,
) -> list[list[GreedyRun]]:
    """Each of `cases` run by `tp_size` ranks in spawned processes (one torch.distributed world of
    `backend`: gloo, or nccl on CUDA devices 0 ...); answers [rank][case]. RuntimeError naming the
    ranks that failed or did not answer in time."""
    context = multiprocessing.get_context("spawn")
    results: multiprocessing.Queue[tuple[int, bytes]] = context.Queue()
    init_addr = f"127.0.0.1:{free_port()}"
    ranks = [
        context.Process(
            target=_rank_main,
            args=(rank, tp_size, backend, init_addr, list(cases), [list(p) for p in prompts], steps, results),
            daemon=True,
        )
        for rank in range(tp_size)
    ]
    for process in ranks:
        process.start()
    answers: dict[int, list[GreedyRun]] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while len(answers) < tp_size:
            failed = [rank for rank, process in enumerate(ranks) if process.exitcode not in (None, 0)]
            if failed or time.monotonic() > deadline:
                codes = {rank: process.exitcode for rank, process in enumerate(ranks)}
                raise RuntimeError(
                    f"tensor-parallel ranks did not all answer (exit codes {codes}; answered: {sorted(answers)})"
                )
            try:
                rank, encoded = results.get(timeout=1.0)
            except queue.Empty:
                continue
            answers[rank] = msgspec.msgpack.decode(encoded, type=list[GreedyRun])
    finally:
        for process in ranks:
            process.join(30)
            if process.is_alive():
                process.kill()
    return [answers[rank] for rank in range(tp_size)]
