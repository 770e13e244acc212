"""The linear-attention resolver: one runner's kernels per phase, from the published exec leaves
and that runner's own default.

    backends = resolve_linear_attn_backends(prefill_default=target_prefill_default("cpu"), device_type="cpu")
    runner.linear_attn_backends = backends      # the stamp: the runner's, never the bags'

What the operator named wins: `linear_attn_prefill_backend` / `linear_attn_decode_backend` over
everything for their phase, then `linear_attn_backend` for both. A runner's per-runner default
stands in for an unnamed prefill; the device's kernels (`device_linear_attn_backend`) stand in for
an unnamed base. Each runner resolves its own: a draft built after its target resolves without the
target's default and cannot change what the target holds, because nothing here or in the caller
writes a choice anywhere but the runner it is for (upstream, the draft's resolution read a
process-wide default the target had just set, and the target then ran the draft's kernels).
"""

from __future__ import annotations

import logging

from config_bags import LinearAttnBackends, get_exec, linear_attn_backends
from config_bags.bags.attention_names import LinearAttnBackendName

logger = logging.getLogger(__name__)


def device_linear_attn_backend(device_type: str) -> LinearAttnBackendName:
    """The kernels a `device_type` device runs when the operator named none: cpu_fused on a CPU,
    triton elsewhere (CUDA)."""
    return "cpu_fused" if device_type == "cpu" else "triton"


def _target_prefill_probe(device_type: str) -> LinearAttnBackendName | None:
    """The prefill kernel a served (target) model runs on this device when it differs from the
    device's decode kernel. On a CPU that is torch_native's chunked form: a prompt is a few large
    matmuls per chunk there, where cpu_fused steps token by token (docs/benchmarks.md, Gated-DeltaNet
    layer). Elsewhere, none."""
    return "torch_native" if device_type == "cpu" else None


def target_prefill_default(device_type: str) -> LinearAttnBackendName | None:
    """A target runner's per-runner prefill default. Declines (None) at once, before probing the
    device and without logging, when the operator named a prefill kernel or the base one: their
    choice is theirs."""
    kernel = get_exec().kernel
    if kernel.linear_attn_prefill_backend is not None or kernel.linear_attn_backend is not None:
        return None
    choice = _target_prefill_probe(device_type)
    if choice is not None:
        logger.info("the served hybrid model prefills its linear-attention layers with %s on %s (its per-runner default)",
                    choice, device_type)
    return choice


def resolve_linear_attn_backends(prefill_default: LinearAttnBackendName | None = None, *,
                                 device_type: str) -> LinearAttnBackends:
    """The frozen (decode, prefill, verify) kernels of one runner on a `device_type` device: the
    operator's leaves, then `prefill_default` for prefill, then the device's kernels."""
    return linear_attn_backends(prefill_default, device_linear_attn_backend(device_type))
