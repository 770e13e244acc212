"""The per-tensor types llama.cpp's `llama-quantize` chooses for a Q4_K_M file of a Llama-family
model (src/llama-quant.cpp, read there and described here), so that a fixture holds what a real
Q4_K_M file holds: fused groups of mixed types, and K-quants substituted where rows are not whole
256-value super-blocks.

Q4_K_M, for a dense model without an importance matrix:
- the LM head, or the token embedding where it is tied (the file has no output.weight): Q6_K, or
  Q8_0 where its rows are not whole super-blocks (chosen as such, not a fallback);
- attn_v and ffn_down of the layers `more_bits` picks (the first and last eighth, and every third
  layer between): Q6_K; every other matrix (and an untied token embedding): Q4_K;
- then the shape fallback: a K-quant whose row is not whole super-blocks is stored as Q5_0 (for
  Q4_K) or Q8_0 (for Q6_K), and as F16 where the row is not whole 32-value blocks either
  (tiny_gguf.stored_type applies it when the file is written).

So a model with 576-wide rows (SmolLM2-135M) mixes Q5_0 q|k with a Q8_0 v in the picked layers,
Q4_K and Q6_K down projections (1536-wide rows) and a Q8_0 tied embedding.
"""

from __future__ import annotations

from typing import Any

from serve_testing.gguf_quantizer import SUPER

# What llama-quantize's Q4_K_M gives a matrix by default, and to the picked layers' attn_v and ffn_down.
Q4_K_M_DEFAULT, Q4_K_M_MORE_BITS = "Q4_K", "Q6_K"


def more_bits(layer: int, layers: int) -> bool:
    """Whether llama-quantize gives `layer` of `layers` more bits: the first and last eighth, and
    every third layer between (its use_more_bits, in integer arithmetic)."""
    return layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2


def q4_k_m_types(model: Any) -> dict[str, str]:
    """The GGUF type llama-quantize's Q4_K_M asks for each matrix of `model` (a transformers Llama,
    Qwen2 or Qwen3), by Hugging Face name, before the shape fallback; ValueError for a tied or
    output matrix whose rows are not whole 32-value blocks (llama-quantize refuses it too)."""
    config = model.config
    layers = config.num_hidden_layers
    tied = bool(config.tie_word_embeddings)
    types: dict[str, str] = {}
    for name, tensor in model.state_dict().items():
        if tensor.dim() != 2 or (name == "lm_head.weight" and tied):
            continue
        if name == "lm_head.weight" or (name == "model.embed_tokens.weight" and tied):
            width = int(tensor.shape[1])
            if width % 32:
                raise ValueError(
                    f"llama-quantize stores {name} as Q8_0 at least, and its rows of {width} are not whole blocks of 32"
                )
            types[name] = "Q8_0" if width % SUPER else "Q6_K"
        elif name.endswith((".self_attn.v_proj.weight", ".mlp.down_proj.weight")):
            layer = int(name.split(".")[2])
            types[name] = Q4_K_M_MORE_BITS if more_bits(layer, layers) else Q4_K_M_DEFAULT
        else:
            types[name] = Q4_K_M_DEFAULT
    return types
