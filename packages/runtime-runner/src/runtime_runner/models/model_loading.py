"""Loading a runner's model: the served target (model.model_path, else the bundled default model:
its entry class over its checkpoint, with the weights quantized as model.quantization and the
checkpoint say), or a target's speculative draft (spec.speculative_draft_model_path: its draft
entry class, for that target); refused where the runner cannot run it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist

from config_bags.server import ExecBag, ModelBag, context_length_of, get_exec, get_model, get_spec
from runtime_runner.errors import UnsupportedConfigError
from runtime_runner.loading.arch_config import ArchConfig
from runtime_runner.loading.checkpoint_source import arch_config_at, draft_arch_config, gguf_file_of
from runtime_runner.loading.default_model import ensure_default_model
from runtime_runner.loading.quantization_support import (
    activations_of,
    cpu_tier_of,
    quantized_weights_refusal_of,
    serves_quantized,
)
from runtime_runner.models.architectures import draft_class_for, model_class_for
from runtime_runner.models.decoder import DecoderForCausalLM, TargetDecoder
from runtime_runner.models.gguf_fit import refuse_misfit_gguf
from runtime_runner.models.hybrid.decoder import HybridDecoder
from runtime_runner.models.hybrid.drafts import HybridDraftDecoder
from runtime_runner.parallel.tensor_parallel import TensorParallel, runner_tensor_parallel


@dataclass(frozen=True)
class Checkpoint:
    """The checkpoint a runner loads: where it lies, the decoder shape it holds, and whether its
    weights are served quantized (a GGUF file, or model.quantization), which sets the dtype."""

    path: Path
    cfg: ArchConfig
    quantized: bool


def target_checkpoint() -> Checkpoint:
    """The served model's checkpoint: model.model_path (a Hugging Face directory or a GGUF file),
    else the bundled default model, converted on first use."""
    configured = get_model().model_path
    path = Path(configured) if configured is not None else ensure_default_model()
    return Checkpoint(path, arch_config_at(path), serves_quantized(get_model(), path))


def draft_checkpoint() -> Checkpoint:
    """A draft runner's checkpoint: spec.speculative_draft_model_path, a Hugging Face directory
    (UnsupportedConfigError when unset, or for a GGUF draft); a draft is never quantized."""
    configured = get_spec().speculative_draft_model_path
    if configured is None:
        raise UnsupportedConfigError(
            "a draft runner needs spec.speculative_draft_model_path (the draft checkpoint), got none"
        )
    path = Path(configured)
    return Checkpoint(path, draft_arch_config(path), quantized=False)


def load_model(
    checkpoint: Checkpoint,
    dtype: torch.dtype,
    device: torch.device,
    *,
    batch_invariant: bool,
    tensor_parallel_group: dist.ProcessGroup | None,
    target: DecoderForCausalLM | HybridDecoder | None,
) -> DecoderForCausalLM | HybridDecoder:
    """The checkpoint loaded as its entry class, or with `target` (the target runner's model) as its
    draft entry class for that target; with `tensor_parallel_group`, this rank's slice of it.
    UnsupportedConfigError where the runner cannot run it: a hybrid under enable_torch_compile,
    tensor parallelism the runner cannot take (runner_tensor_parallel), quantized weights where
    their kernels do not run, a draft shorter than its target's context."""
    cfg = checkpoint.cfg
    if cfg.hybrid is not None and get_exec().graph.enable_torch_compile:
        raise UnsupportedConfigError(
            f"enable_torch_compile compiles the Llama-family decode step; {cfg.architecture} "
            "(a Gated-DeltaNet hybrid) decodes eagerly; accepted: enable_torch_compile off"
        )
    tensor_parallel = runner_tensor_parallel(
        tensor_parallel_group, cfg, batch_invariant=batch_invariant, draft=target is not None
    )
    if target is None:
        return load_target(
            checkpoint.path,
            cfg,
            dtype,
            device,
            batch_invariant=batch_invariant,
            model=get_model(),
            exec=get_exec(),
            tensor_parallel=tensor_parallel,
        )
    draft = load_draft(checkpoint.path, cfg, dtype, device, batch_invariant=batch_invariant, target=target)
    length = context_length_of(get_model(), draft.cfg.max_position_embeddings)
    served = context_length_of(get_model(), target.cfg.max_position_embeddings)
    if length < served:
        raise UnsupportedConfigError(
            f"the draft checkpoint {checkpoint.path} holds {length} positions, fewer than the served context "
            f"length {served}; accepted: a draft at least as long, or model.context_length <= {length}"
        )
    return draft


def load_target(
    model_dir: Path,
    cfg: ArchConfig,
    dtype: torch.dtype,
    device: torch.device,
    *,
    batch_invariant: bool,
    model: ModelBag,
    exec: ExecBag,
    tensor_parallel: TensorParallel | None = None,
) -> DecoderForCausalLM | HybridDecoder:
    """The entry class of `cfg` loaded from `model_dir` (a Hugging Face directory or a GGUF file);
    UnsupportedConfigError where quantized weights cannot run (quantization_support), CheckpointError
    for a GGUF file that holds other tensors than the entry class reads (gguf_fit). With
    `tensor_parallel` (a Llama-family decoder only), this rank's slices of it."""
    gguf = gguf_file_of(model_dir)
    reason = quantized_weights_refusal_of(model, exec, device.type, gguf, lambda: cfg)
    if reason is not None:
        raise UnsupportedConfigError(reason)
    if gguf is not None:
        refuse_misfit_gguf(gguf, cfg)
    entry = model_class_for(cfg.architecture)
    if issubclass(entry, TargetDecoder):
        return entry.load(
            model_dir,
            cfg,
            dtype,
            device,
            batch_invariant=batch_invariant,
            quantization=model.quantization,
            tensor_parallel=tensor_parallel,
            quantized_activations=activations_of(exec, gguf),
            cpu_tier=cpu_tier_of(exec, gguf),
        )
    return entry.load(model_dir, cfg, dtype, device, batch_invariant=batch_invariant)


def load_draft(
    model_dir: Path,
    cfg: ArchConfig,
    dtype: torch.dtype,
    device: torch.device,
    *,
    batch_invariant: bool,
    target: DecoderForCausalLM | HybridDecoder,
) -> DecoderForCausalLM | HybridDecoder:
    """The draft checkpoint in `model_dir` loaded with its draft entry class for `target`: a
    Llama-family draft shares its Llama-family target's embedding and LM head; a hybrid draft holds
    its own. UnsupportedConfigError for a draft the target cannot share with."""
    entry = draft_class_for(cfg.architecture)
    if issubclass(entry, HybridDraftDecoder):
        return entry.load_for(
            model_dir, cfg, dtype, device, batch_invariant=batch_invariant, target_vocab_size=target.cfg.vocab_size
        )
    if not isinstance(target, DecoderForCausalLM):
        raise UnsupportedConfigError(
            f"a {cfg.architecture} draft shares its target's embedding and LM head, which a "
            f"{target.cfg.architecture} target lays out otherwise; "
            "accepted: a draft of the target's family"
        )
    return entry.load(model_dir, cfg, dtype, device, batch_invariant=batch_invariant, target=target)
