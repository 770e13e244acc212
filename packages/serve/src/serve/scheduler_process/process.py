"""Entry point of the scheduler process: publish, build the runner and the scheduler, serve."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import config_bags
import zmq
from attn_backends import DraftBackendFactory, LinearAttnBackendFactory, build_attention_pair
from runtime_runner.quantization_support import quantization_description
from runtime_runner.runner import ModelRunner
from runtime_scheduler import ModelExecutor, Scheduler, Speculator
from spec_workers import DraftModelWorker, NgramWorker

from serve.child_process import Handover, die_with_parent, publish_received
from serve.ipc.channels import Addresses, Receiver, Sender
from serve.ipc.messages import ModelInfo, ProcessReady, RunnerStamp
from serve.scheduler_process.loop import SchedulerLoop
from serve.scheduler_process.runners import ModelRunners

logger = logging.getLogger(__name__)


def build_scheduler(executor_of: Callable[[ModelExecutor], ModelExecutor] = lambda executor: executor) -> tuple[Scheduler, ModelRunners]:
    """The runners (given attn_backends' factories) and the scheduler driving them, from the
    published bags: the target runner as the executor; with spec.speculative_algorithm, its
    speculator too (ngram: prompt lookup; draft_model: a draft runner whose worker is both
    executor and speculator). `executor_of` may wrap the executor (tools/bench_serving.py times
    its forwards that way); the server drives it itself."""
    target = ModelRunner(build_attention_pair, linear_attn_factory=LinearAttnBackendFactory())
    algorithm = config_bags.get_spec().speculative_algorithm
    executor: ModelExecutor = target
    speculator: Speculator | None = None
    draft: ModelRunner | None = None
    if algorithm == "ngram":
        speculator = NgramWorker()
    elif algorithm == "draft_model":
        draft = ModelRunner(DraftBackendFactory(), target=target, linear_attn_factory=LinearAttnBackendFactory())
        worker = DraftModelWorker(target, draft)
        executor, speculator = worker, worker
    scheduler = Scheduler(executor_of(executor), model_max_length=target.arch.max_position_embeddings,
                          max_total_tokens=target.pool.num_slots, speculator=speculator,
                          state_slots=target.state_slots)
    return scheduler, ModelRunners(target, draft)


def run_scheduler(handover: Handover, addresses: Addresses) -> None:
    """Entry point of the scheduler process."""
    die_with_parent()
    publish_received(handover, "scheduler")
    context: zmq.Context[Any] = zmq.Context()
    inbox = Receiver(context, addresses.scheduler)
    to_detokenizer = Sender(context, addresses.detokenizer)
    logger.info("loading the model")
    scheduler, runners = build_scheduler()
    config_bags.begin_serving()
    target = runners.target
    model = ModelInfo(context_length=target.context_length, max_total_tokens=target.pool.num_slots, vocab_size=target.arch.vocab_size,
                      runners=runners.stamps(), speculative_algorithm=config_bags.get_spec().speculative_algorithm,
                      quantization=quantization_description(config_bags.get_model()))
    logger.info("model loaded: %s", model)
    to_detokenizer.send(
        ProcessReady(role=config_bags.published_role(), pid=os.getpid(), config_hash=config_bags.config_hash(),
                     role_check=config_bags.ROLE_CHECK_MODE.value, model=model)
    )
    SchedulerLoop(scheduler, inbox, to_detokenizer).run_forever()
