"""The reference a GGUF checkpoint is held to: its weights de-quantized (`QuantizedTensor.dequantize`,
fp32) and written back as a Hugging Face checkpoint, which the runner and transformers load as any.

The tensor names come from gguf-py's own map (llama.cpp's) and a Llama file's Q/K rows are put back
in halves here, apart from the runner's loader, so a loader that mis-maps a tensor or leaves the
rotary interleave in place serves other weights than this reference holds. The config is the
runner's reading of the metadata (runtime_runner.loading.gguf.arch).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import torch
from safetensors.torch import save_file

from runtime_runner.kernels.quantized_tensor import KIND_OF_TYPE, QuantizedTensor
from runtime_runner.loading.gguf.arch import gguf_arch_config
from runtime_runner.loading.gguf.file import GgufFile
from runtime_runner.loading.gguf.format import read_gguf_layout

_ARCHES = {"llama": gguf.MODEL_ARCH.LLAMA, "qwen2": gguf.MODEL_ARCH.QWEN2, "qwen3": gguf.MODEL_ARCH.QWEN3}
_HF_SUFFIXES = (
    "input_layernorm",
    "self_attn.q_proj",
    "self_attn.k_proj",
    "self_attn.v_proj",
    "self_attn.o_proj",
    "self_attn.q_norm",
    "self_attn.k_norm",
    "post_attention_layernorm",
    "mlp.gate_proj",
    "mlp.up_proj",
    "mlp.down_proj",
)


def halved_rotary_rows(values: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's interleaved rotary rows [h, j, half] of `heads` heads back in Hugging Face's halves [h, half, j]."""
    per_half = values.shape[0] // heads // 2
    return values.reshape(heads, per_half, 2, *values.shape[1:]).swapaxes(1, 2).reshape(values.shape)


def _hf_names(arch: str, layers: int) -> dict[str, str]:
    """gguf-py's GGUF name of every Hugging Face tensor name a Llama-family decoder may hold, inverted."""
    name_map = gguf.get_tensor_name_map(_ARCHES[arch], layers)
    names = [
        "model.embed_tokens",
        "model.norm",
        "lm_head",
        *(f"model.layers.{i}.{suffix}" for i in range(layers) for suffix in _HF_SUFFIXES),
    ]
    found = {}
    for hf in names:
        for suffix in (".weight", ".bias"):
            mapped = name_map.get_name(hf + suffix, try_suffixes=(".weight", ".bias"))
            if mapped is not None:
                found[mapped] = hf + suffix
    return found


def write_dequantized_checkpoint(gguf_file: Path, folder: Path) -> Path:
    """`gguf_file`'s tensors as fp32 (every quantized one de-quantized), with a config.json of its
    metadata, saved in `folder` (answered)."""
    file = GgufFile(gguf_file)
    cfg = gguf_arch_config(file)
    hf_of = _hf_names(file.architecture, cfg.num_layers)
    tensors: dict[str, torch.Tensor] = {}
    for entry in read_gguf_layout(gguf_file).tensors:
        raw = file.values(entry)
        kind = KIND_OF_TYPE.get(entry.tensor_type)
        if kind is not None:
            rows, length = entry.shape
            values = QuantizedTensor(kind, torch.from_numpy(raw), None, (rows, length)).dequantize().numpy()
        elif entry.tensor_type == gguf.GGMLQuantizationType.BF16:
            values = torch.from_numpy(raw.view(np.int16)).view(torch.bfloat16).float().numpy()
        else:
            values = raw.astype(np.float32)
        name = hf_of[entry.name]
        if file.architecture == "llama" and (".q_proj." in name or ".k_proj." in name):
            values = halved_rotary_rows(values, cfg.num_heads if ".q_proj." in name else cfg.num_kv_heads)
        tensors[name] = torch.from_numpy(np.ascontiguousarray(values))
    folder.mkdir(parents=True, exist_ok=True)
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    transformers: Any = importlib.import_module("transformers")
    config = getattr(transformers, cfg.architecture.replace("ForCausalLM", "Config"))(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.hidden_size,
        intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        head_dim=cfg.head_dim,
        rms_norm_eps=cfg.rms_norm_eps,
        max_position_embeddings=cfg.max_position_embeddings,
        rope_theta=cfg.rope.theta,
        tie_word_embeddings=cfg.tie_word_embeddings,
        attention_bias=cfg.attention_bias,
        mlp_bias=cfg.mlp_bias,
        architectures=[cfg.architecture],
        eos_token_id=list(cfg.eos_token_ids) or None,
        dtype="float32",
    )
    config.save_pretrained(folder)
    return folder
