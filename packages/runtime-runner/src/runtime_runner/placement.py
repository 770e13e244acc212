"""Where the model runs and in which dtype, answered from the published bags."""

from __future__ import annotations

import torch

from config_bags.server import DeviceBag, MemoryBag, ModelBag, ParallelBag

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def device_of(device: DeviceBag) -> torch.device:
    """device.device, with auto meaning cuda when available, else cpu."""
    if device.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device.device is 'cuda' but torch sees no CUDA device; accepted here: cpu or auto")
    return torch.device(device.device)


def model_dtype_of(
    model: ModelBag, checkpoint_dtype: str, device: torch.device, *, quantized: bool = False
) -> torch.dtype:
    """model.dtype; auto means the checkpoint's, except on a CPU: float32 becomes bfloat16 (AMX
    matmuls) for dense weights, and `quantized` weights (a GGUF file's, or int8) compute in float32:
    their kernels de-quantize to fp32 and read the same bytes whatever the activations, so bfloat16
    would only round more (the default model's GGUF decodes no slower in float32)."""
    if model.dtype != "auto":
        return _DTYPES[model.dtype]
    if quantized and device.type == "cpu":
        return torch.float32
    dtype = _DTYPES.get(checkpoint_dtype, torch.float32)
    if dtype == torch.float32 and device.type == "cpu":
        return torch.bfloat16
    return dtype


def kv_dtype_of(memory: MemoryBag, model_dtype: torch.dtype) -> torch.dtype:
    """memory.kv_cache_dtype; auto means the model's dtype."""
    return model_dtype if memory.kv_cache_dtype == "auto" else _DTYPES[memory.kv_cache_dtype]


def torch_threads_of(device: DeviceBag, parallel: ParallelBag, cores: int) -> int | None:
    """Torch intra-op threads of one rank: device.cpu_threads when set, else the node's `cores`
    shared out among the ranks it runs (dp_size * tp_size / nnodes), at least one each; None
    (torch's own default) when the node runs one rank."""
    if device.cpu_threads is not None:
        return device.cpu_threads
    ranks = parallel.dp_size * parallel.tp_size // parallel.nnodes
    return None if ranks == 1 else max(1, cores // ranks)
