"""The linear-attention resolver: one runner's kernels per phase, from the published exec leaves
and that runner's own default.

    backends = resolve_linear_attn_backends(prefill_default=probe, device_type="cpu")
    runner.linear_attn_backends = backends      # the stamp: the runner's, never the bags'

What the operator named wins: `linear_attn_prefill_backend` / `linear_attn_decode_backend` for
their phase, then `linear_attn_backend` for both. A runner's per-runner prefill default stands in
for an unnamed prefill, and the device's kernels (`config_bags.server.device_linear_attn_backend_of`) for an unnamed
base. The default may be a gate (a callable that probes the device): it is called only when the
operator named neither the prefill nor the base kernel, so a named kernel costs no probe and no
log line. Each runner resolves its own: a draft built after its target resolves without the
target's default and cannot change what the target holds, because nothing here or in the caller
writes a choice anywhere but the runner it is for (upstream, the draft's resolution read a
process-wide default the target had just set, and the target then ran the draft's kernels).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from config_bags.server import LinearAttnBackends, get_exec, linear_attn_backends
from config_bags.server.bags.attention_names import LinearAttnBackendName

logger = logging.getLogger(__name__)

# A per-runner prefill default: a kernel name, or a gate that answers one (or None) when asked.
PrefillDefault = LinearAttnBackendName | Callable[[], LinearAttnBackendName | None] | None


def _applied_default(prefill_default: PrefillDefault) -> LinearAttnBackendName | None:
    """The per-runner default, asked of its gate only when the operator left the prefill kernel to it."""
    kernel = get_exec().kernel
    if (
        prefill_default is None
        or kernel.linear_attn_prefill_backend is not None
        or kernel.linear_attn_backend is not None
    ):
        return None
    choice = prefill_default() if callable(prefill_default) else prefill_default
    if choice is not None:
        logger.info("this runner prefills its linear-attention layers with %s (its per-runner default)", choice)
    return choice


def resolve_linear_attn_backends(prefill_default: PrefillDefault = None, *, device_type: str) -> LinearAttnBackends:
    """The frozen (decode, prefill, verify) kernels of one runner on a `device_type` device: the
    operator's leaves, then `prefill_default` for prefill, then the device's kernels."""
    return linear_attn_backends(device_type, _applied_default(prefill_default))
