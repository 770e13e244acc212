"""The task a launch serves (model.task) and the checkpoint that serves it: a cross-encoder
(BertForSequenceClassification) reranks, another encoder (BertModel) embeds, a decoder
generates, or embeds when asked (--task embed: its hidden rows pooled, no LM head). What this
build cannot do is refused by the rule `task_served`, in resolution and in every process: an
encoder has no LM head to generate with, a decoder no classifier to rerank with, a Gated-DeltaNet
hybrid's embeddings have no model code, pooling configures embeddings only, and embeddings and
scores run on the CPU in float32 or bfloat16, in one process (no tensor-parallel split, no
replicas, no speculation)."""

from __future__ import annotations

from config_bags import Rule
from config_bags.server import Bags
from config_bags.server.bags.model import Task
from runtime_runner.loading.encoder_config import CROSS_ENCODER_ARCHITECTURES, ENCODER_ARCHITECTURES
from serve.served_model import ServedModel


def task_of_architecture(architecture: str) -> Task:
    """The task a checkpoint of `architecture` serves: rerank for a cross-encoder, embed for
    another encoder, generate for a decoder."""
    if architecture in CROSS_ENCODER_ARCHITECTURES:
        return "rerank"
    return "embed" if architecture in ENCODER_ARCHITECTURES else "generate"


_WHAT_IT_IS: dict[Task, str] = {
    "generate": "a decoder: it generates, or embeds with task 'embed', and this build reranks with "
    "cross-encoder checkpoints (BertForSequenceClassification) only",
    "embed": "an encoder without a classifier: it embeds",
    "rerank": "a cross-encoder: it scores pairs",
}


def _encoder_as_built(bags: Bags, task: str, model: str) -> str | None:
    """An encoder, or a decoder embedding, runs on the CPU, in float32 or bfloat16 (the
    batch-invariant linear's), in one process; `model` names it in the message."""
    parallel, spec = bags.parallel, bags.spec
    if bags.device.device == "cuda":
        return f"task = {task!r} runs {model} on the CPU, and device = 'cuda'; accepted: cpu or auto"
    if bags.model.dtype == "float16":
        return (
            f"task = {task!r} runs {model} in float32 or bfloat16, and dtype = 'float16'; accepted: auto, "
            "float32, bfloat16"
        )
    if parallel.tp_size > 1 or parallel.dp_size > 1:
        return (
            f"task = {task!r} runs {model} in one process, and tp_size = {parallel.tp_size}, dp_size = "
            f"{parallel.dp_size}; accepted: 1 for both"
        )
    if spec.speculative_algorithm is not None:
        return (
            f"task = {task!r} decodes nothing, and speculative_algorithm = {spec.speculative_algorithm!r} "
            "speculates decodes; accepted: unset"
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
        decoder_embeds = native == "generate" and task == "embed"
        if task != native and not decoder_embeds:
            accepted = "'generate' or 'embed'" if native == "generate" else repr(native)
            return f"task = {task!r}: {architecture} is {_WHAT_IT_IS[native]}; accepted: {accepted}"
        if decoder_embeds and model.linear_attention:
            return (
                f"task = 'embed': {architecture} is a Gated-DeltaNet hybrid, and this build embeds with a "
                "Llama, Qwen2 or Qwen3 decoder (or a BERT encoder); accepted: 'generate'"
            )
        if pooling is not None and task != "embed":
            return f"pooling = {pooling!r} configures embeddings, and task = {task!r}; accepted: unset"
        if task == "generate":
            return None
        return _encoder_as_built(bags, task, "the decoder's embeddings" if decoder_embeds else "the encoder")

    return Rule(
        "task_served", ("task", "pooling", "tp_size", "dp_size", "speculative_algorithm", "device", "dtype"), broken
    )
