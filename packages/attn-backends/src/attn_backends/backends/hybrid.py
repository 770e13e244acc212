"""The hybrid attention container: a prefill-half backend and a decode-half backend, one selected per forward.

The runner builds one when the two halves resolve to different kernels (`auto` on a CPU does).
It selects by the forward's mode exactly as `dispatched_half` (dispatch.py) answers (decode and
idle to the decode half, a target verify by `speculative_attention_mode`, everything else to the
prefill half), so `serving_attention_backend` can mirror it; the selected child plans and
attends (container.py). The children carry the stamps: the container is built on a path that stamps them.
"""

from __future__ import annotations

from attn_backends.backend import AttentionBackend
from attn_backends.backends.container import ContainerBackend
from attn_backends.dispatch import dispatched_half
from attn_backends.metadata import AttentionMetadataView
from config_bags.server import AttentionHalf


class HybridAttentionBackend(ContainerBackend):
    """Two backends, one per half; each forward runs on the one its mode dispatches to."""

    stamp_refusal = (
        "a hybrid attention container carries no stamp of its own; stamp its children (stamps_children=True)"
    )

    def __init__(self, prefill: AttentionBackend, decode: AttentionBackend) -> None:
        self.attn_backends: tuple[AttentionBackend, AttentionBackend] = (prefill, decode)

    @property
    def effective_name(self) -> str:
        """The children's stamps, prefill half first."""
        prefill, decode = self.attn_backends
        return f"hybrid(prefill={prefill.effective_name}, decode={decode.effective_name})"

    def child_for(self, half: AttentionHalf) -> AttentionBackend:
        """The backend of `half`."""
        return self.attn_backends[0] if half == "prefill" else self.attn_backends[1]

    def select_child(self, metadata: AttentionMetadataView) -> AttentionBackend:
        """The child this forward's mode dispatches to."""
        return self.child_for(dispatched_half(metadata.forward_mode))
