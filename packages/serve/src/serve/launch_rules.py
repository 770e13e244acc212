"""The rules serve publishes with its bags in every process, on top of config-bags' invariants:
no absent feature configured, attention kernels that run on this host, a decode half torch.compile
can trace when it compiles, batch-invariant kernels when deterministic inference is on, speculative
leaves only with the algorithm that reads them and no draft tree, quantized weights only where
their kernels run, a parallel launch this build runs over a model that splits, and a context
length the served model can hold. Resolution checks the same rules, so each exists once."""

from __future__ import annotations

import functools
from pathlib import Path

from attn_backends import attention_choice
from config_bags import Rule
from config_bags.server import (
    SNAPSHOT_GRID,
    Bags,
    SpecBag,
    attention_leaf_of,
    context_length_within_model,
    deterministic_inference_of,
)
from runtime_runner import ArchConfig, CheckpointError, UnsupportedConfigError
from runtime_runner.determinism import batch_invariance_refusal_of
from runtime_runner.loading.checkpoint_source import arch_config_at, gguf_file_of
from runtime_runner.loading.quantization_support import quantized_weights_refusal_of
from runtime_runner.models.compiled_decode import TRACEABLE_DECODE_KERNELS
from serve.absent_features import absent_feature_rules
from serve.parallel_rules import PARALLEL_AS_BUILT, tensor_parallel_fits_model
from serve.served_model import ServedModel
from serve.task_rules import task_served
from serve.visible_device import visible_device_type

ATTENTION_BACKEND_LEAVES = ("attention_backend", "prefill_attention_backend", "decode_attention_backend")


def _unrunnable_backend(bags: Bags) -> str | None:
    device_type = visible_device_type(bags)
    if device_type is None:
        return None
    batch_invariant = deterministic_inference_of(bags.exec, device_type)
    for half in ("prefill", "decode"):
        leaf, name = attention_leaf_of(bags.exec.kernel, half)
        choice = attention_choice(name, half=half, device_type=device_type, batch_invariant=batch_invariant)
        if choice.host_refusal is not None:
            return f"{leaf} = {name}{choice.builds}: {choice.host_refusal}"
    return None


def _untraceable_compiled_decode(bags: Bags) -> str | None:
    if not bags.exec.graph.enable_torch_compile:
        return None
    device_type = visible_device_type(bags)
    if device_type is None:
        return None
    leaf, name = attention_leaf_of(bags.exec.kernel, "decode")
    kernel = attention_choice(
        name, half="decode", device_type=device_type, batch_invariant=deterministic_inference_of(bags.exec, device_type)
    ).kernel
    if kernel in TRACEABLE_DECODE_KERNELS:
        return None
    return (
        f"enable_torch_compile = True compiles the decode step, which needs a decode half torch.compile can trace "
        f"({', '.join(TRACEABLE_DECODE_KERNELS)}); got {leaf} = {name}, building {kernel}"
    )


def _nondeterministic_kernels(bags: Bags) -> str | None:
    """Only an operator's True can break it: unset, the leaf resolves off wherever it would."""
    device_type = visible_device_type(bags)
    if device_type is None or not deterministic_inference_of(bags.exec, device_type):
        return None
    reason = batch_invariance_refusal_of(bags.exec, device_type)
    if reason is not None:
        return reason
    for half in ("prefill", "decode"):
        leaf, name = attention_leaf_of(bags.exec.kernel, half)
        choice = attention_choice(name, half=half, device_type=device_type, batch_invariant=True)
        if choice.invariance_refusal is not None:
            return (
                "enable_deterministic_inference = True needs batch-invariant attention, but "
                f"{leaf} = {name}{choice.builds}: {choice.invariance_refusal}"
            )
    return None


ATTENTION_BACKENDS_RUN_HERE = Rule(
    "attention_backends_run_here", (*ATTENTION_BACKEND_LEAVES, "device"), _unrunnable_backend
)
COMPILED_DECODE_TRACEABLE = Rule(
    "compiled_decode_traceable",
    ("enable_torch_compile", *ATTENTION_BACKEND_LEAVES, "device"),
    _untraceable_compiled_decode,
)

DETERMINISTIC_KERNELS = Rule(
    "deterministic_kernels",
    ("enable_deterministic_inference", "enable_torch_compile", *ATTENTION_BACKEND_LEAVES, "device"),
    _nondeterministic_kernels,
)


SPEC_LEAVES = tuple(SpecBag.__struct_fields__)
# The leaves only a draft model reads; under ngram they would be accepted and ignored.
DRAFT_MODEL_LEAVES = ("speculative_draft_model_path", "speculative_num_steps", "speculative_draft_attention_backend")


def _idle_spec_leaf(bags: Bags) -> str | None:
    spec, default = bags.spec, SpecBag()
    algorithm = spec.speculative_algorithm
    for leaf in SPEC_LEAVES:
        value = getattr(spec, leaf)
        if leaf == "speculative_algorithm" or value == getattr(default, leaf):
            continue
        if algorithm is None:
            return (
                f"{leaf} = {value!r} configures speculative decoding, which is off; accepted: --speculative-algorithm "
                "ngram or draft_model with it"
            )
        if algorithm == "ngram" and leaf in DRAFT_MODEL_LEAVES:
            return (
                f"{leaf} = {value!r} configures a draft model, but speculative_algorithm = 'ngram' has none; accepted: "
                "draft_model with it"
            )
    if spec.speculative_eagle_topk > 1:
        return (
            f"speculative_eagle_topk = {spec.speculative_eagle_topk} asks for a tree of drafts; this build verifies a "
            "chain of drafts, not a tree; accepted: 1"
        )
    return None


def _unrunnable_draft_backend(bags: Bags) -> str | None:
    name = bags.spec.speculative_draft_attention_backend
    if name is None:
        return None
    device_type = visible_device_type(bags)
    if device_type is None:
        return None
    batch_invariant = deterministic_inference_of(bags.exec, device_type)
    for half in ("prefill", "decode"):
        choice = attention_choice(name, half=half, device_type=device_type, batch_invariant=batch_invariant)
        if choice.host_refusal is not None:
            return f"speculative_draft_attention_backend = {name}{choice.builds}: {choice.host_refusal}"
        if choice.invariance_refusal is not None:
            return (
                f"speculative_draft_attention_backend = {name}{choice.builds} is not batch-invariant, and "
                f"deterministic inference is on: {choice.invariance_refusal}"
            )
    return None


SPECULATION_AS_BUILT = Rule("speculation_as_built", SPEC_LEAVES, _idle_spec_leaf)
DRAFT_ATTENTION_RUNS_HERE = Rule(
    "draft_attention_runs_here",
    ("speculative_draft_attention_backend", "enable_deterministic_inference", "device"),
    _unrunnable_draft_backend,
)


@functools.lru_cache(maxsize=8)
def _arch_config(model_path: str, size: int, modified_ns: int) -> ArchConfig | None:
    """The checkpoint's ArchConfig, read once per version of its file (an override re-checks the
    rules in every process); None where it cannot be read, which the model's handlers name."""
    try:
        return arch_config_at(Path(model_path))
    except (CheckpointError, UnsupportedConfigError, OSError, ValueError):
        return None


def _checkpoint_config(model_path: str | None) -> ArchConfig | None:
    if model_path is None:
        return None  # the default model, resolved before anything serves it
    path = Path(model_path)
    gguf = gguf_file_of(path)
    file = gguf if gguf is not None else path / "config.json"
    if not file.is_file():
        return None
    stat = file.stat()
    return _arch_config(model_path, stat.st_size, stat.st_mtime_ns)


def _unserved_quantized_weights(bags: Bags) -> str | None:
    model, device_type = bags.model, visible_device_type(bags)
    if device_type is None:
        return None
    try:
        gguf = None if model.model_path is None else gguf_file_of(Path(model.model_path))
    except CheckpointError:
        return None  # a model path the model's handlers name
    return quantized_weights_refusal_of(
        model, bags.exec, device_type, gguf, lambda: _checkpoint_config(model.model_path)
    )


QUANTIZED_WEIGHTS_RUN_HERE = Rule(
    "quantized_weights_run_here",
    ("quantization", "model_path", "dtype", "enable_torch_compile", "quantized_activations", "cpu_isa", "device"),
    _unserved_quantized_weights,
)


def launch_rules(model: ServedModel) -> tuple[Rule, ...]:
    """Every rule of a launch serving `model` (its positions bound the context length; its shape
    must split over the tensor-parallel ranks: serve.parallel_rules)."""
    return (
        *absent_feature_rules(),
        ATTENTION_BACKENDS_RUN_HERE,
        COMPILED_DECODE_TRACEABLE,
        DETERMINISTIC_KERNELS,
        SPECULATION_AS_BUILT,
        DRAFT_ATTENTION_RUNS_HERE,
        QUANTIZED_WEIGHTS_RUN_HERE,
        PARALLEL_AS_BUILT,
        tensor_parallel_fits_model(model),
        task_served(model),
        context_length_within_model(model.max_positions),
        *((SNAPSHOT_GRID,) if model.linear_attention else ()),
    )
