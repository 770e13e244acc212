"""The draft runner's backend: its extend wrapper and its multi-step decode container, one selected per forward.

The selection is `dispatched_half`'s, so `serving_attention_backend(mode, stamp)` names the kernel
each forward runs on: decode goes to the multi-step container (which picks the step's child),
extend, mixed and draft_extend to the extend wrapper. A target verify is the target runner's and an
idle forward has nothing to draft, so both are refused.
"""

from __future__ import annotations

from attn_backends.backend import AttentionBackend
from attn_backends.backends.container import ContainerBackend
from attn_backends.dispatch import ForwardMode, dispatched_half
from attn_backends.drafts.extend import DraftExtendBackend
from attn_backends.drafts.multi_step import MultiStepDraftBackend
from attn_backends.metadata import AttentionMetadataView

_REFUSED: tuple[ForwardMode, ...] = ("target_verify", "idle")


class DraftRunnerBackend(ContainerBackend):
    """The draft runner's two backends; each forward runs on the one its mode dispatches to."""

    stamp_refusal = (
        "a draft runner's backend carries no stamp of its own; its extend and multi-step backends carry them"
    )

    def __init__(self, extend: DraftExtendBackend, multi_step: MultiStepDraftBackend) -> None:
        self.extend = extend
        self.multi_step = multi_step

    @property
    def effective_name(self) -> str:
        """The extend wrapper's stamp and the multi-step container's summary."""
        return f"draft(extend={self.extend.effective_name}, decode={self.multi_step.effective_name})"

    def backend_for(self, forward_mode: ForwardMode) -> AttentionBackend:
        """The backend a draft runner's forward of `forward_mode` runs on."""
        if forward_mode in _REFUSED:
            raise ValueError(
                f"a draft runner serves extend, mixed, draft_extend and decode forwards, got {forward_mode!r} "
                "(a target verify runs on the target runner; an idle forward has nothing to draft)"
            )
        return self.multi_step if dispatched_half(forward_mode) == "decode" else self.extend

    def select_child(self, metadata: AttentionMetadataView) -> AttentionBackend:
        """The backend this forward's mode dispatches to."""
        return self.backend_for(metadata.forward_mode)
