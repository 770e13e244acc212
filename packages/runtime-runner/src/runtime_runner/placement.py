"""Where the model runs and in which dtype, answered from the published bags."""

from __future__ import annotations

import torch
from config_bags import DeviceBag, MemoryBag, ModelBag

_DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def device_of(device: DeviceBag) -> torch.device:
    """device.device, with auto meaning cuda when available, else cpu."""
    if device.device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device.device is 'cuda' but torch sees no CUDA device; accepted here: cpu or auto")
    return torch.device(device.device)


def model_dtype_of(model: ModelBag, checkpoint_dtype: str, device: torch.device) -> torch.dtype:
    """model.dtype; auto means the checkpoint's, except float32 on CPU becomes bfloat16 (AMX matmuls)."""
    if model.dtype != "auto":
        return _DTYPES[model.dtype]
    dtype = _DTYPES.get(checkpoint_dtype, torch.float32)
    if dtype == torch.float32 and device.type == "cpu":
        return torch.bfloat16
    return dtype


def kv_dtype_of(memory: MemoryBag, model_dtype: torch.dtype) -> torch.dtype:
    """memory.kv_cache_dtype; auto means the model's dtype."""
    return model_dtype if memory.kv_cache_dtype == "auto" else _DTYPES[memory.kv_cache_dtype]
