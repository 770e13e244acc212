"""Loading the served model (a runner's target): its entry class over its checkpoint, with the
weights quantized as model.quantization and the checkpoint say, refused where they cannot run."""

from __future__ import annotations

from pathlib import Path

import torch
from config_bags import ExecBag, ModelBag

from runtime_runner.errors import UnsupportedConfigError
from runtime_runner.loading.arch_config import ArchConfig
from runtime_runner.loading.checkpoint_source import gguf_file_of
from runtime_runner.loading.quantization_support import quantized_weights_refusal_of
from runtime_runner.models.architectures import model_class_for
from runtime_runner.models.decoder import DecoderForCausalLM, TargetDecoder
from runtime_runner.models.hybrid.decoder import HybridDecoder
from runtime_runner.parallel.tensor_parallel import TensorParallel


def load_target(model_dir: Path, cfg: ArchConfig, dtype: torch.dtype, device: torch.device, *, batch_invariant: bool,
                model: ModelBag, exec: ExecBag, tensor_parallel: TensorParallel | None = None) -> DecoderForCausalLM | HybridDecoder:
    """The entry class of `cfg` loaded from `model_dir` (a Hugging Face directory or a GGUF file);
    UnsupportedConfigError where quantized weights cannot run (quantization_support). With
    `tensor_parallel` (a Llama-family decoder only), this rank's slices of it."""
    reason = quantized_weights_refusal_of(model, exec, device.type, gguf_file_of(model_dir), lambda: cfg)
    if reason is not None:
        raise UnsupportedConfigError(reason)
    entry = model_class_for(cfg.architecture)
    if issubclass(entry, TargetDecoder):
        return entry.load(model_dir, cfg, dtype, device, batch_invariant=batch_invariant, quantization=model.quantization,
                          tensor_parallel=tensor_parallel)
    return entry.load(model_dir, cfg, dtype, device, batch_invariant=batch_invariant)
