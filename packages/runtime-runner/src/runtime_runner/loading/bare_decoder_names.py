"""A decoder checkpoint saved without its causal-LM wrapper: Qwen3-Embedding's safetensors hold
`embed_tokens.weight`, `layers.0...` and `norm.weight` (its inner Qwen3Model's names, no LM head,
the embedding tied), where a causal LM holds `model.embed_tokens.weight`. The loader asks for the
causal LM's names (tensor_names), so such a checkpoint's names are read under the `model.` prefix
(as vLLM and SGLang load it)."""

from __future__ import annotations

from collections.abc import Iterable

_PREFIX = "model."
_BARE_EMBEDDING = "embed_tokens.weight"


def served_names_of(stored: Iterable[str]) -> dict[str, str]:
    """The name the loader asks for -> the name the checkpoint stores, for each of its `stored`
    tensor names: each prefixed with `model.` in a bare decoder checkpoint (it holds
    embed_tokens.weight and no name under model.), each as it is otherwise."""
    names = list(stored)
    bare = _BARE_EMBEDDING in names and not any(name.startswith(_PREFIX) for name in names)
    return {(_PREFIX + name if bare else name): name for name in names}
