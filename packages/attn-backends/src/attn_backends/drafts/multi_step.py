"""The multi-step draft decode container: one decode-half backend per draft step.

A draft runner proposes `speculative_num_steps` tokens per verify, one decode forward per step,
and each step plans on its own backend, so a step's plan never overwrites another's. The forward's
metadata names its step (`draft_step`); the container plans that child (container.py). The children carry the
stamps: the container is built on a path that stamps them.
"""

from __future__ import annotations

from collections.abc import Sequence

from attn_backends.backend import AttentionBackend
from attn_backends.backends.container import ContainerBackend
from attn_backends.metadata import AttentionMetadataView


class MultiStepDraftBackend(ContainerBackend):
    """One backend per draft step; draft step i of a proposal is a decode forward planned on child i."""

    stamp_refusal = (
        "a multi-step draft container carries no stamp of its own; stamp its children (stamps_children=True)"
    )

    def __init__(self, steps: Sequence[AttentionBackend]) -> None:
        self.attn_backends: tuple[AttentionBackend, ...] = tuple(steps)

    @property
    def effective_name(self) -> str:
        """The children's stamps, step 0 first."""
        return f"multi_step({', '.join(child.effective_name for child in self.attn_backends)})"

    def child_for(self, draft_step: int) -> AttentionBackend:
        """The backend of draft step `draft_step` (from 0)."""
        if not 0 <= draft_step < len(self.attn_backends):
            raise ValueError(
                f"draft_step {draft_step} is out of range: this container has {len(self.attn_backends)} steps, "
                f"0 to {len(self.attn_backends) - 1}"
            )
        return self.attn_backends[draft_step]

    def select_child(self, metadata: AttentionMetadataView) -> AttentionBackend:
        """The child of the draft step this decode forward names."""
        if metadata.forward_mode != "decode":
            raise ValueError(
                f"a multi-step draft container plans decode forwards only, got forward_mode {metadata.forward_mode!r}"
            )
        if metadata.draft_step is None:
            raise ValueError(
                f"a draft decode names its draft step (0 to {len(self.attn_backends) - 1}) in metadata.draft_step; "
                "got None"
            )
        return self.child_for(metadata.draft_step)
