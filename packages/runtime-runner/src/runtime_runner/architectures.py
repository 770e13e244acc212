"""The registry from a checkpoint's `architectures[0]` to the class that runs it."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from runtime_runner.decoder import DecoderForCausalLM, LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM
from runtime_runner.errors import UnsupportedArchitectureError

MODEL_CLASSES: Mapping[str, type[DecoderForCausalLM]] = MappingProxyType(
    {cls.architecture: cls for cls in (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM)}
)


def model_class_for(architecture: str) -> type[DecoderForCausalLM]:
    """The entry class of `architecture`; an unknown one raises listing the supported ones."""
    cls = MODEL_CLASSES.get(architecture)
    if cls is None:
        raise UnsupportedArchitectureError(f"architecture {architecture!r} is not supported; supported: {', '.join(sorted(MODEL_CLASSES))}")
    return cls
