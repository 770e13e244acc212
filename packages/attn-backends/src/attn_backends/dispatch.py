"""Which attention half a forward runs on, the stamp of what a runner built, and the backend a
forward dispatches to.

The forward modes are the vocabulary the scheduler, the runner and the backends share; each
declares the same `Literal` for itself, and the types meet structurally. A hybrid
attention container (prefill half != decode half) selects its child with `dispatched_half_of`;
`serving_attention_backend` answers the same selection as a kernel name, preferring the runner's
stamp, so a draft runner answers with its own backend rather than the target's configured pair.
"""

from __future__ import annotations

from typing import Literal, NamedTuple, get_args

from config_bags.server import AttentionHalf, AttentionKernelName, attention_backends, get_spec
from config_bags.server.bags.spec import SpeculativeAttentionMode

ForwardMode = Literal["extend", "decode", "mixed", "idle", "target_verify", "draft_extend"]
KERNEL_NAMES: tuple[AttentionKernelName, ...] = get_args(AttentionKernelName)


class AttentionStamp(NamedTuple):
    """What one runner resolved and built: the effective kernel of each half, and whether it is a
    draft runner's own override. Stamped on the runner once, before anything reads it; never
    written back into the bags."""

    prefill: AttentionKernelName
    decode: AttentionKernelName
    is_draft_override: bool


def dispatched_half_of(
    forward_mode: ForwardMode, speculative_attention_mode: SpeculativeAttentionMode
) -> AttentionHalf:
    """Decode and idle run on the decode half; a target verify on the half
    `speculative_attention_mode` names; everything else (extend, mixed, draft extend) on the
    prefill half."""
    if forward_mode in ("decode", "idle"):
        return "decode"
    if forward_mode == "target_verify":
        return speculative_attention_mode
    return "prefill"


def dispatched_half(forward_mode: ForwardMode) -> AttentionHalf:
    """`dispatched_half_of` with the published spec.speculative_attention_mode."""
    return dispatched_half_of(forward_mode, get_spec().speculative_attention_mode)


def serving_attention_backend(forward_mode: ForwardMode, stamp: AttentionStamp | None) -> str:
    """The kernel a forward of `forward_mode` dispatches to: the stamped half when the runner has a
    stamp; else the configured pair's half, which must then name a kernel (auto and aliases are
    resolved only by the factory, so without a stamp they answer nothing)."""
    half = dispatched_half(forward_mode)
    if stamp is not None:
        return stamp.prefill if half == "prefill" else stamp.decode
    configured: str = getattr(attention_backends(), half)
    if configured not in KERNEL_NAMES:
        raise ValueError(
            f"the {half} attention backend is configured as {configured!r}, which names no kernel until the factory "
            f"resolves it; ask with the runner's stamp (kernels: {', '.join(KERNEL_NAMES)})"
        )
    return configured
