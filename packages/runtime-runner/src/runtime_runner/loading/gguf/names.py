"""GGUF tensor names (llama.cpp's) as the Hugging Face names the loader asks for."""

from __future__ import annotations

import re
from types import MappingProxyType

from runtime_runner.loading.tensor_names import EMBED, FINAL_NORM, LM_HEAD, layer_prefix

# A whole-model tensor's GGUF base name -> its Hugging Face name (without the .weight/.bias suffix).
MODEL_TENSORS: MappingProxyType[str, str] = MappingProxyType(
    {
        "token_embd": EMBED.removesuffix(".weight"),
        "output_norm": FINAL_NORM.removesuffix(".weight"),
        "output": LM_HEAD.removesuffix(".weight"),
    }
)
# A layer tensor's GGUF base name (after blk.N.) -> its name under the layer's Hugging Face prefix.
LAYER_TENSORS: MappingProxyType[str, str] = MappingProxyType(
    {
        "attn_norm": "input_layernorm",
        "attn_q": "self_attn.q_proj",
        "attn_k": "self_attn.k_proj",
        "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj",
        "attn_q_norm": "self_attn.q_norm",
        "attn_k_norm": "self_attn.k_norm",
        "ffn_norm": "post_attention_layernorm",
        "ffn_gate": "mlp.gate_proj",
        "ffn_up": "mlp.up_proj",
        "ffn_down": "mlp.down_proj",
    }
)
_LAYER = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")
_MODEL = re.compile(r"(\w+)\.(weight|bias)")


def hf_name_of(gguf_name: str) -> str | None:
    """The Hugging Face name of a GGUF tensor (`blk.3.attn_q.weight` ->
    `model.layers.3.self_attn.q_proj.weight`); None for a tensor this decoder has no place for."""
    layer = _LAYER.fullmatch(gguf_name)
    if layer is not None:
        index, base, suffix = layer.groups()
        mapped = LAYER_TENSORS.get(base)
        return None if mapped is None else f"{layer_prefix(int(index))}{mapped}.{suffix}"
    whole = _MODEL.fullmatch(gguf_name)
    if whole is not None:
        mapped = MODEL_TENSORS.get(whole.group(1))
        return None if mapped is None else f"{mapped}.{whole.group(2)}"
    return None


_HF_LAYER = re.compile(r"model\.layers\.(\d+)\.(.+)\.(weight|bias)")


def gguf_name_of(hf_name: str) -> str:
    """The GGUF name llama.cpp gives a Hugging Face tensor name this decoder reads (the inverse of
    hf_name_of); the name itself for one it does not map."""
    layer = _HF_LAYER.fullmatch(hf_name)
    if layer is not None:
        index, mapped, suffix = layer.groups()
        base = next((gguf for gguf, hf in LAYER_TENSORS.items() if hf == mapped), None)
        return hf_name if base is None else f"blk.{index}.{base}.{suffix}"
    stem, _, suffix = hf_name.rpartition(".")
    base = next((gguf for gguf, hf in MODEL_TENSORS.items() if hf == stem), None)
    return hf_name if base is None else f"{base}.{suffix}"
