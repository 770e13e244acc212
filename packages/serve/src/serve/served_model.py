"""The served checkpoint's shape as the launch rules need it, resolved once from its config and
handed to every process with the bags (a child never reads the checkpoint to check a rule)."""

from __future__ import annotations

import msgspec

from runtime_runner import ArchConfig


class ServedModel(msgspec.Struct, frozen=True, kw_only=True):
    """What the rules know of the served model: its maximum positions (the context length's
    bound) and the sizes a tensor-parallel split must divide."""

    architecture: str
    max_positions: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    linear_attention: bool  # a Gated-DeltaNet hybrid

    @classmethod
    def of(cls, arch: ArchConfig) -> ServedModel:
        """The shape of the checkpoint `arch` was read from."""
        return cls(
            architecture=arch.architecture,
            max_positions=arch.max_position_embeddings,
            num_attention_heads=arch.num_heads,
            num_key_value_heads=arch.num_kv_heads,
            intermediate_size=arch.intermediate_size,
            linear_attention=arch.hybrid is not None,
        )
