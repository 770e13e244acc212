"""Entry point of the scheduler process: publish, build the runner and the scheduler, serve."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import config_bags
import zmq
from attn_backends import build_attention_pair
from runtime_runner.runner import ModelRunner
from runtime_scheduler import ModelExecutor, Scheduler

from serve.child_process import Handover, die_with_parent, publish_received
from serve.ipc.channels import Addresses, Receiver, Sender
from serve.ipc.messages import ModelInfo, ProcessReady, RunnerStamp
from serve.scheduler_process.loop import SchedulerLoop

logger = logging.getLogger(__name__)


def build_scheduler(executor_of: Callable[[ModelRunner], ModelExecutor] = lambda runner: runner) -> tuple[Scheduler, ModelRunner]:
    """The runner (given attn_backends' factory) and the scheduler driving it as its executor,
    from the published bags. `executor_of` may wrap the runner (tools/bench_serving.py times its
    forwards that way); the server drives the runner itself."""
    runner = ModelRunner(build_attention_pair)
    scheduler = Scheduler(executor_of(runner), model_max_length=runner.arch.max_position_embeddings,
                          max_total_tokens=runner.pool.num_slots)
    return scheduler, runner


def run_scheduler(handover: Handover, addresses: Addresses) -> None:
    """Entry point of the scheduler process."""
    die_with_parent()
    publish_received(handover, "scheduler")
    context: zmq.Context[Any] = zmq.Context()
    inbox = Receiver(context, addresses.scheduler)
    to_detokenizer = Sender(context, addresses.detokenizer)
    logger.info("loading the model")
    scheduler, runner = build_scheduler()
    config_bags.begin_serving()
    stamp = runner.attention_stamp
    model = ModelInfo(context_length=runner.context_length, max_total_tokens=runner.pool.num_slots, vocab_size=runner.arch.vocab_size,
                      runners={"target": RunnerStamp(prefill=stamp.prefill, decode=stamp.decode, is_draft_override=stamp.is_draft_override,
                                                       batch_invariant=runner.batch_invariant)})
    logger.info("model loaded: %s", model)
    to_detokenizer.send(
        ProcessReady(role=config_bags.published_role(), pid=os.getpid(), config_hash=config_bags.config_hash(),
                     role_check=config_bags.ROLE_CHECK_MODE.value, model=model)
    )
    SchedulerLoop(scheduler, inbox, to_detokenizer).run_forever()
