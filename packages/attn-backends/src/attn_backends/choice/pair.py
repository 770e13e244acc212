"""The attention pair a runner serves with: each half built by the factory, stamped, and held together.

`build_attention_pair` answers the runner's stamp, a frozen (prefill, decode, is_draft_override)
of effective kernel names, and the backend to drive: one backend when both halves built the same
kernel, else a hybrid container of the two, stamped on the children-stamping path.
"""

from __future__ import annotations

from attn_backends.backend import AttentionBackend
from attn_backends.backends.hybrid import HybridAttentionBackend
from attn_backends.choice.registry import build_attention_backend
from attn_backends.choice.stamping import stamp_built
from attn_backends.dispatch import AttentionStamp


def build_attention_pair(
    prefill: str, decode: str, *, device_type: str, is_draft_override: bool = False, batch_invariant: bool = False
) -> tuple[AttentionStamp, AttentionBackend]:
    """Build the `prefill` and `decode` halves as configured (kernels, aliases or auto) for a
    `device_type` host, each batch-invariant when `batch_invariant` (refused where it cannot be);
    answers (stamp, backend)."""
    prefill_kernel, prefill_backend = build_attention_backend(
        prefill, half="prefill", device_type=device_type, batch_invariant=batch_invariant
    )
    decode_kernel, decode_backend = build_attention_backend(
        decode, half="decode", device_type=device_type, batch_invariant=batch_invariant
    )
    stamp = AttentionStamp(prefill=prefill_kernel, decode=decode_kernel, is_draft_override=is_draft_override)
    if prefill_kernel == decode_kernel:
        return stamp, stamp_built(prefill_backend, (prefill_kernel,), stamps_children=False)
    hybrid = HybridAttentionBackend(prefill_backend, decode_backend)
    return stamp, stamp_built(hybrid, (prefill_kernel, decode_kernel), stamps_children=True)
