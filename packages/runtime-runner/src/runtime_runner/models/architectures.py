"""The registries from a checkpoint's `architectures[0]` to the entry class that loads it: as the
served target, or as a speculative draft."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from runtime_runner.errors import UnsupportedArchitectureError
from runtime_runner.models.decoder import LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, TargetDecoder
from runtime_runner.models.drafts import (
    DraftDecoder,
    LlamaDraftForCausalLM,
    Qwen2DraftForCausalLM,
    Qwen3DraftForCausalLM,
)
from runtime_runner.models.hybrid.decoder import HybridDecoder, Qwen3_5ForCausalLM, Qwen3NextForCausalLM
from runtime_runner.models.hybrid.drafts import HybridDraftDecoder, Qwen3_5DraftForCausalLM, Qwen3NextDraftForCausalLM

MODEL_CLASSES: Mapping[str, type[TargetDecoder] | type[HybridDecoder]] = MappingProxyType(
    {
        cls.architecture: cls
        for cls in (LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3NextForCausalLM, Qwen3_5ForCausalLM)
    }
)
# Keyed by the architecture of the target each is named after (a draft checkpoint of that family).
DRAFT_CLASSES: Mapping[str, type[DraftDecoder] | type[HybridDraftDecoder]] = MappingProxyType(
    {
        cls.architecture: cls
        for cls in (
            LlamaDraftForCausalLM,
            Qwen2DraftForCausalLM,
            Qwen3DraftForCausalLM,
            Qwen3NextDraftForCausalLM,
            Qwen3_5DraftForCausalLM,
        )
    }
)


def model_class_for(architecture: str) -> type[TargetDecoder] | type[HybridDecoder]:
    """The entry class of `architecture`; an unknown one raises listing the supported ones."""
    cls = MODEL_CLASSES.get(architecture)
    if cls is None:
        raise UnsupportedArchitectureError(
            f"architecture {architecture!r} is not supported; supported: {', '.join(sorted(MODEL_CLASSES))}"
        )
    return cls


def draft_class_for(architecture: str) -> type[DraftDecoder] | type[HybridDraftDecoder]:
    """The draft entry class of a draft checkpoint of `architecture`; an unknown one raises listing
    the supported ones."""
    cls = DRAFT_CLASSES.get(architecture)
    if cls is None:
        raise UnsupportedArchitectureError(
            f"architecture {architecture!r} has no draft entry class; supported drafts: "
            f"{', '.join(sorted(DRAFT_CLASSES))}"
        )
    return cls
