"""The rules of a parallel launch that serve publishes with its bags, on top of config-bags'
topology invariants (`nodes_divide_ranks`, `expert_parallel_divides_tp`, and the parallel bag's
own `node_rank < nnodes`, a rendezvous address across nodes):

- `parallel_as_built`: what this build runs across processes: data-parallel replicas on node 0
  only (each replica's first rank takes its requests from the tokenizer there, over local ipc);
  no compiled decode step, no draft model and no quantized weights under tensor parallelism
  (none is sharded); on CUDA, a device for every rank of the node;
- `tensor_parallel_fits_model(model)`: the served model splits over tp_size ranks, stated as the
  equation that fails (`num_attention_heads = 9 not divisible by tp_size = 2`); a hybrid's
  linear-attention layers are not split.
"""

from __future__ import annotations

from pathlib import Path

import torch

from config_bags import Rule
from config_bags.server import Bags
from runtime_runner import CheckpointError
from runtime_runner.loading.quantization_support import serves_quantized
from runtime_runner.parallel.rank_layout import tensor_parallel_refusal
from serve.served_model import ServedModel
from serve.visible_device import visible_device_type


def _unbuilt_parallel(bags: Bags) -> str | None:
    parallel, tp = bags.parallel, bags.parallel.tp_size
    if parallel.dp_size > 1 and parallel.nnodes > 1:
        return (
            f"dp_size = {parallel.dp_size} with nnodes = {parallel.nnodes}: data-parallel replicas run on node 0, "
            "whose tokenizer hands each its requests over local ipc; accepted: dp_size = 1 with nnodes > 1 (one "
            "tensor-parallel group across the nodes)"
        )
    if tp > 1 and bags.exec.graph.enable_torch_compile:
        return (
            f"enable_torch_compile = True compiles a one-process decode step, and tp_size = {tp} splits the model over "
            "processes; accepted: enable_torch_compile off with tp_size > 1"
        )
    if tp > 1 and bags.spec.speculative_algorithm == "draft_model":
        return (
            f"speculative_algorithm = 'draft_model' runs an unsharded draft runner, and tp_size = {tp} splits the "
            "target; accepted: ngram or no speculation with tp_size > 1"
        )
    if tp > 1 and _quantized(bags):
        what = (
            f"quantization = {bags.model.quantization!r}"
            if bags.model.quantization
            else f"model_path = {bags.model.model_path} (GGUF)"
        )
        return (
            f"tp_size = {tp} slices dense weight matrices, and {what} keeps them quantized; accepted: tp_size = 1 with "
            "quantized weights, or a dense Hugging Face checkpoint"
        )
    device_type = visible_device_type(bags)
    if device_type is None:
        return None
    ranks, devices = parallel.dp_size * tp // parallel.nnodes, torch.cuda.device_count()
    if device_type == "cuda" and ranks > devices:
        return (
            f"dp_size * tp_size / nnodes = {parallel.dp_size} * {tp} / {parallel.nnodes} = {ranks} ranks on this node "
            f"need {ranks} CUDA devices, and torch sees {devices}"
        )
    return None


def _quantized(bags: Bags) -> bool:
    model = bags.model
    try:
        return model.model_path is not None and serves_quantized(model, Path(model.model_path))
    except CheckpointError:
        return False  # a model path the model's handlers name


PARALLEL_AS_BUILT = Rule(
    "parallel_as_built",
    (
        "dp_size",
        "tp_size",
        "nnodes",
        "enable_torch_compile",
        "speculative_algorithm",
        "quantization",
        "model_path",
        "device",
    ),
    _unbuilt_parallel,
)


def tensor_parallel_fits_model(model: ServedModel) -> Rule:
    """The rule that `model` splits over tp_size ranks: heads and intermediate rows divide, KV
    heads split or are replicated, and no linear-attention layers."""

    def broken(bags: Bags) -> str | None:
        tp = bags.parallel.tp_size
        if tp == 1:
            return None
        if model.linear_attention:
            return (
                f"tp_size = {tp}: {model.architecture} has linear-attention layers, which run unsharded in one "
                "process; accepted: tp_size = 1"
            )
        return tensor_parallel_refusal(
            model.num_attention_heads, model.num_key_value_heads, model.intermediate_size, tp
        )

    return Rule("tensor_parallel_fits_model", ("tp_size",), broken)
