"""Entry point of a scheduler process: publish, join the replica's tensor-parallel group when
there is one, build the runner and the scheduler, serve."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
import zmq

import config_bags
import config_bags.server
from attn_backends import DraftBackendFactory, LinearAttnBackendFactory, build_attention_pair
from runtime_runner.loading.quantization_support import quantization_description, served_cpu_tier
from runtime_runner.runner import ModelRunner
from runtime_scheduler import GrammarEngine, ModelExecutor, Scheduler, Speculator
from serve.child_process import Handover, die_with_parent, publish_received
from serve.grammar.xgrammar_engine import XGrammarEngine, tokenizer_info_of
from serve.ipc.channels import Addresses, Receiver, Sender
from serve.ipc.messages import ModelInfo, ProcessReady
from serve.scheduler_process.distributed import join_world, serve_leaders_bags
from serve.scheduler_process.encoder_loop import run_encoder
from serve.scheduler_process.lockstep import Lockstep
from serve.scheduler_process.loop import SchedulerLoop
from serve.scheduler_process.placement import ALONE, RankPlacement
from serve.scheduler_process.runners import ModelRunners
from serve.tokenizer.eos import eos_token_ids
from serve.tokenizer.loading import load_tokenizer
from spec_workers import DraftModelWorker, NgramWorker

logger = logging.getLogger(__name__)


def build_scheduler(
    executor_of: Callable[[ModelExecutor], ModelExecutor] = lambda executor: executor,
    *,
    tensor_parallel_group: dist.ProcessGroup | None = None,
) -> tuple[Scheduler, ModelRunners]:
    """The runners (given attn_backends' factories) and the scheduler driving them, from the
    published bags: the target runner as the executor; with spec.speculative_algorithm, its
    speculator too (ngram: prompt lookup; draft_model: a draft runner whose worker is both
    executor and speculator). `executor_of` may wrap the executor (tools/bench_serving.py times
    its forwards that way); the server drives it itself. With parallel.tp_size > 1 the target
    runner holds its rank's slice over `tensor_parallel_group`. With serving.grammar_backend
    xgrammar the scheduler compiles output constraints for the target's vocabulary."""
    target = ModelRunner(
        build_attention_pair,
        linear_attn_factory=LinearAttnBackendFactory(),
        tensor_parallel_group=tensor_parallel_group,
    )
    algorithm = config_bags.server.get_spec().speculative_algorithm
    executor: ModelExecutor = target
    speculator: Speculator | None = None
    draft: ModelRunner | None = None
    if algorithm == "ngram":
        speculator = NgramWorker()
    elif algorithm == "draft_model":
        draft = ModelRunner(DraftBackendFactory(), target=target, linear_attn_factory=LinearAttnBackendFactory())
        worker = DraftModelWorker(target, draft)
        executor, speculator = worker, worker
    scheduler = Scheduler(
        executor_of(executor),
        model_max_length=target.arch.max_position_embeddings,
        max_total_tokens=target.pool.num_slots,
        speculator=speculator,
        state_slots=target.state_slots,
        snapshot_slots=target.snapshot_slots,
        grammars=grammar_engine_of(target.arch.vocab_size, synchronous=tensor_parallel_group is not None),
    )
    return scheduler, ModelRunners(target, draft)


def grammar_engine_of(vocab_size: int, *, synchronous: bool) -> GrammarEngine | None:
    """The grammar engine serving.grammar_backend names, for a model whose logits are `vocab_size`
    wide (None for "none": constrained requests are refused)."""
    if config_bags.server.get_serving().grammar_backend == "none":
        return None

    def tokenizer_info() -> Any:
        tokenizer = load_tokenizer()
        return tokenizer_info_of(tokenizer, vocab_size, eos_token_ids(tokenizer))

    return XGrammarEngine(tokenizer_info, synchronous=synchronous)


def run_scheduler(handover: Handover, addresses: Addresses, placement: RankPlacement = ALONE) -> None:
    """Entry point of a scheduler process: rank `placement.rank` of data-parallel replica
    `placement.replica`. The replica's first rank takes its messages and talks to the
    detokenizer; with tp_size > 1 its other ranks follow it in lockstep over torch.distributed."""
    die_with_parent()
    publish_received(handover, "scheduler", placement.name)
    if config_bags.server.get_model().task in ("embed", "rerank"):
        run_encoder(addresses, placement)
        return
    lockstep, group = Lockstep.alone(), None
    if config_bags.server.get_parallel().tp_size > 1:
        groups = join_world(placement)
        serve_leaders_bags(groups, placement.leads, handover.model)
        lockstep, group = Lockstep(groups.messages, groups.leader, placement.leads), groups.tensors
    inbox, to_detokenizer = None, None
    if placement.leads:
        context: zmq.Context[Any] = zmq.Context()
        inbox = Receiver(context, addresses.schedulers[placement.replica])
        to_detokenizer = Sender(context, addresses.detokenizer)
    logger.info("loading the model")
    scheduler, runners = build_scheduler(tensor_parallel_group=group)
    config_bags.begin_serving()
    target = runners.target
    model = ModelInfo(
        context_length=target.context_length,
        max_total_tokens=target.pool.num_slots,
        vocab_size=target.arch.vocab_size,
        runners=runners.stamps(),
        speculative_algorithm=config_bags.server.get_spec().speculative_algorithm,
        quantization=quantization_description(config_bags.server.get_model()),
        cpu_tier=served_cpu_tier(config_bags.server.get_model(), config_bags.server.get_exec()),
        recurrent_state_mb=target.recurrent_state_bytes / 2**20,
        state_snapshot_slots=target.snapshot_slots,
    )
    logger.info("model loaded: %s; torch threads: %d", model, torch.get_num_threads())
    ready = ProcessReady(
        name=placement.name,
        role=config_bags.published_role(),
        pid=os.getpid(),
        config_hash=config_bags.config_hash(),
        role_check=config_bags.ROLE_CHECK_MODE.value,
        model=model if placement.leads else None,
    )
    for each in lockstep.gather(ready):
        if to_detokenizer is not None:
            to_detokenizer.send(each)
    SchedulerLoop(scheduler, inbox, to_detokenizer, lockstep=lockstep, placement=placement).run_forever()
