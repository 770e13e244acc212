"""Where quantized weights (a GGUF checkpoint, or model.quantization = int8) run, and why not
elsewhere. serve's rule `quantized_weights_run_here` states the same refusals at launch and on
every override; a runner built without serve (a test, a benchmark) is refused here."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import torch

from config_bags.server import ExecBag, ModelBag, quantized_activations_of
from config_bags.server.bags.exec import QuantizedActivations
from native_build import TIERS, CpuTier, detected_tier, tier_runs_here
from runtime_runner.loading.arch_config import ArchConfig
from runtime_runner.loading.checkpoint_source import gguf_file_of
from runtime_runner.loading.encoder_config import ENCODER_ARCHITECTURES
from runtime_runner.loading.gguf.file import GgufFile
from runtime_runner.placement import model_dtype_of

# The entry classes whose projections take a QuantizedTensor (the decoders' embeddings too; the
# hybrids' take none). The BERT encoders' come only from int8 at load: a BERT GGUF file is refused
# by its architecture when it is opened.
QUANTIZED_ARCHITECTURES = ("LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", *ENCODER_ARCHITECTURES)
# The activation dtypes the quantized kernels compute in (runtime_runner.kernels.quantized_linear).
QUANTIZED_ACTIVATIONS = (torch.float32, torch.bfloat16)


def serves_quantized(model: ModelBag, model_dir: Path) -> bool:
    """Whether the checkpoint at `model_dir`, served as `model` says, has quantized weights."""
    return model.quantization is not None or gguf_file_of(model_dir) is not None


def quantized_weights_refusal_of(
    model: ModelBag, exec: ExecBag, device_type: str, gguf: Path | None, config: Callable[[], ArchConfig | None]
) -> str | None:
    """Why the served weights cannot be quantized as `model` says (`gguf`: the GGUF file its
    model_path names, or None), on a `device_type` runner; None when they can or are dense.
    `config` answers the checkpoint's ArchConfig (None where it is not known yet), asked only of
    quantized weights."""
    if exec.kernel.quantized_activations == "int8":
        refusal = int8_activations_refusal_of(model, gguf)
        if refusal is not None:
            return refusal
    refusal = cpu_isa_refusal_of(exec, gguf)
    if refusal is not None:
        return refusal
    if model.quantization is None and gguf is None:
        return None
    if model.quantization is not None and gguf is not None:
        return (
            f"quantization = {model.quantization!r} quantizes a bf16/fp32 checkpoint at load, but model_path = "
            f"{model.model_path} is a GGUF checkpoint, quantized already; accepted: quantization unset with a GGUF "
            "file, or int8 with a Hugging Face checkpoint directory"
        )
    what = f"quantization = {model.quantization!r}" if gguf is None else f"model_path = {model.model_path} (GGUF)"
    if device_type != "cpu":
        return f"{what}: the quantized kernels run on a CPU only, not on {device_type}; accepted: device = cpu"
    if exec.graph.enable_torch_compile:
        return (
            f"{what}: enable_torch_compile compiles the dense decode step, and quantized weights decode eagerly; "
            "accepted: enable_torch_compile = False"
        )
    cfg = config()
    if cfg is None:
        return None
    if cfg.architecture not in QUANTIZED_ARCHITECTURES:
        return (
            f"{what}: {cfg.architecture} is not served with quantized weights; accepted: "
            f"{', '.join(QUANTIZED_ARCHITECTURES)}, or dense weights (quantization unset, a Hugging Face checkpoint)"
        )
    dtype = model_dtype_of(model, cfg.checkpoint_dtype, torch.device(device_type), quantized=True)
    if dtype not in QUANTIZED_ACTIVATIONS:
        return (
            f"{what}: the quantized kernels compute in float32 or bfloat16, and dtype = {model.dtype!r} computes in "
            f"{str(dtype).removeprefix('torch.')}; accepted: dtype = bfloat16 or float32"
        )
    return None


def int8_activations_refusal_of(model: ModelBag, gguf: Path | None) -> str | None:
    """Why quantized_activations = int8 cannot apply to the served weights (it reads a GGUF file's
    blocks, with the integer kernels of an AVX2 CPU); None when it can."""
    if gguf is None:
        weights = "int8 per-channel weights (quantization = 'int8')" if model.quantization else "dense weights"
        return (
            f"quantized_activations = 'int8' reads a GGUF checkpoint's quantized matrices, and model_path = "
            f"{model.model_path} holds {weights}; accepted: quantized_activations = 'float32', or a GGUF model_path"
        )
    if not integer_kernels_here():
        return (
            "quantized_activations = 'int8' runs integer kernels written for AVX2, which this CPU lacks "
            f"({torch.backends.cpu.get_cpu_capability()}); accepted: quantized_activations = 'float32'"
        )
    return None


def integer_kernels_here() -> bool:
    """Whether this CPU runs the integer rule's kernels (AVX2 at least)."""
    return detected_tier() is not None


def activations_of(exec: ExecBag, gguf: Path | None) -> QuantizedActivations:
    """How the served quantized matrices read their rows (config_bags.server.quantized_activations_of)
    for weights from `gguf` (None: not a GGUF file)."""
    return quantized_activations_of(exec, gguf is not None, integer_kernels_here())


def cpu_tier_of(exec: ExecBag, gguf: Path | None) -> CpuTier | None:
    """The instruction tier the integer kernels run on (exec.kernel.cpu_isa, unset: this CPU's
    highest), or None where no matrix reads int8 activations."""
    if activations_of(exec, gguf) != "int8":
        return None
    return exec.kernel.cpu_isa if exec.kernel.cpu_isa is not None else detected_tier()


def cpu_isa_refusal_of(exec: ExecBag, gguf: Path | None) -> str | None:
    """Why exec.kernel.cpu_isa cannot apply: it chooses the integer kernels' tier, so it needs
    matrices that read int8 activations, and a tier this CPU runs; None when it can (or is unset)."""
    tier = exec.kernel.cpu_isa
    if tier is None:
        return None
    if activations_of(exec, gguf) != "int8":
        return (
            f"cpu_isa = {tier!r} chooses the instruction tier of the integer kernels, and no matrix runs them "
            f"(quantized_activations = {activations_of(exec, gguf)!r}); accepted: cpu_isa unset, or a GGUF "
            "model_path read with quantized_activations = 'int8'"
        )
    if not tier_runs_here(tier):
        runs = [t for t in TIERS if tier_runs_here(t)]
        return (
            f"cpu_isa = {tier!r} is above this CPU's highest instruction tier ({detected_tier()}); accepted: "
            f"{', '.join(runs)}, or unset"
        )
    return None


def served_cpu_tier(model: ModelBag, exec: ExecBag) -> CpuTier | None:
    """The instruction tier the served model's integer kernels run on (cpu_tier_of), None where
    none runs (dense weights, or float32 activations)."""
    gguf = None if model.model_path is None else gguf_file_of(Path(model.model_path))
    return cpu_tier_of(exec, gguf)


def quantization_description(model: ModelBag) -> str | None:
    """What the served weights are, as /server_info says it: `int8`, the GGUF file's tensor types
    (`gguf F32 x61, Q4_1 x210, Q8_0 x1`), or None for a dense checkpoint."""
    if model.quantization is not None:
        return model.quantization
    gguf = None if model.model_path is None else gguf_file_of(Path(model.model_path))
    if gguf is None:
        return None
    return "gguf " + ", ".join(f"{kind} x{count}" for kind, count in GgufFile(gguf).type_counts().items())
