"""The task a launch serves (model.task) and the checkpoint that serves it: an encoder (BertModel)
embeds, a decoder generates. What this build cannot do is refused by the rule `task_served`, in
resolution and in every process: a decoder's embeddings and a cross-encoder's reranking wait for
their model code, an encoder has no LM head to generate with, pooling configures embeddings only,
and the encoder runs in one process (no tensor-parallel split, no replicas, no speculation)."""

from __future__ import annotations

from config_bags import Rule
from config_bags.server import Bags
from config_bags.server.bags.model import Task
from runtime_runner.loading.encoder_config import ENCODER_ARCHITECTURES
from serve.served_model import ServedModel


def task_of_architecture(architecture: str) -> Task:
    """The task a checkpoint of `architecture` serves: embed for an encoder, generate for a decoder."""
    return "embed" if architecture in ENCODER_ARCHITECTURES else "generate"


def _one_process(bags: Bags) -> str | None:
    parallel, spec = bags.parallel, bags.spec
    if parallel.tp_size > 1 or parallel.dp_size > 1:
        return (
            f"task = 'embed' runs the encoder in one process, and tp_size = {parallel.tp_size}, dp_size = "
            f"{parallel.dp_size}; accepted: 1 for both"
        )
    if spec.speculative_algorithm is not None:
        return (
            f"task = 'embed' decodes nothing, and speculative_algorithm = {spec.speculative_algorithm!r} speculates "
            "decodes; accepted: unset"
        )
    return None


def task_served(model: ServedModel) -> Rule:
    """The rule that the task is one this build serves on `model`'s architecture."""
    architecture = model.architecture
    native = task_of_architecture(architecture)

    def broken(bags: Bags) -> str | None:
        task, pooling = bags.model.task, bags.model.pooling
        if task is None:
            return None  # resolution declares the checkpoint's
        if task == "rerank":
            return (
                f"task = 'rerank': this build has no cross-encoder model code yet; accepted: {native!r} for "
                f"{architecture}"
            )
        if task != native:
            what = (
                "an encoder, with no LM head to generate with"
                if native == "embed"
                else "a decoder, and this build embeds with encoder checkpoints (BertModel) only"
            )
            return f"task = {task!r}: {architecture} is {what}; accepted: {native!r}"
        if pooling is not None and task == "generate":
            return f"pooling = {pooling!r} configures embeddings, and task = 'generate'; accepted: unset"
        return _one_process(bags) if task == "embed" else None

    return Rule(
        "task_served",
        ("task", "pooling", "tp_size", "dp_size", "speculative_algorithm"),
        broken,
    )
