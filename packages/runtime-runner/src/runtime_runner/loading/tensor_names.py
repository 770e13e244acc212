"""The Hugging Face names of a decoder checkpoint's tensors that every family shares: the
embedding, the final norm, the LM head, and the prefix of a layer's tensors. A GGUF file's
tensors are asked for under these names too (gguf/names)."""

from __future__ import annotations

EMBED = "model.embed_tokens.weight"
LM_HEAD = "lm_head.weight"
FINAL_NORM = "model.norm.weight"


def layer_prefix(index: int) -> str:
    """The name prefix of decoder layer `index`'s tensors."""
    return f"model.layers.{index}."
