"""The linear layers' backend of one runner, built from the stamp on that runner, and the factory
serve hands a runner to resolve and build it.

    factory = LinearAttnBackendFactory()
    runner.linear_attn_backends = factory.resolve(device_type="cpu", is_draft=False)   # the stamp
    backend = factory.build(runner, device_type="cpu")    # reads runner.linear_attn_backends
    backend.prefill.gated_delta_prefill(...)             # the kernels of each phase

`build` reads the attribute off the runner it is for and nothing else, so a runner built without
its stamp raises AttributeError there, and two runners in a process each run their own choice.
A target's per-runner prefill default is the factory's `target_prefill_default` gate (a draft
gets none). serve passes none: on the devices this build serves, no kernel prefills a target's
prompts faster than the device's own (on a CPU, cpu_fused's recurrence beat torch_native's
chunked form at every prompt length measured, docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from attn_backends.linear.kernels import LinearAttnKernels, linear_attn_kernels_for
from attn_backends.linear.resolver import resolve_linear_attn_backends
from config_bags.server import LinearAttnBackends
from config_bags.server.bags.attention_names import LinearAttnBackendName

# (device type) -> the target's prefill kernel there, or None: probed only when the operator named none.
TargetPrefillGate = Callable[[str], LinearAttnBackendName | None]


class StampedRunner(Protocol):
    """A runner that holds its linear-attention stamp."""

    linear_attn_backends: LinearAttnBackends


@dataclass(frozen=True)
class LinearAttnBackend:
    """The kernels of each phase of one runner's linear-attention layers (verify: the prefill name's)."""

    prefill: LinearAttnKernels
    decode: LinearAttnKernels
    verify: LinearAttnKernels


class LinearAttnBackendFactory:
    """Resolves a runner's linear-attention kernels and builds its backend from its stamp."""

    def __init__(self, target_prefill_default: TargetPrefillGate | None = None) -> None:
        self.target_prefill_default = target_prefill_default

    def resolve(self, *, device_type: str, is_draft: bool) -> LinearAttnBackends:
        """The runner's choice: a target's per-runner prefill default (a draft has none) under the
        operator's leaves, then the device's kernels."""
        gate = self.target_prefill_default
        if is_draft or gate is None:
            return resolve_linear_attn_backends(device_type=device_type)
        return resolve_linear_attn_backends(lambda: gate(device_type), device_type=device_type)

    def build(self, runner: StampedRunner, *, device_type: str) -> LinearAttnBackend:
        """The backend of the kernels `runner.linear_attn_backends` names (AttributeError when the
        runner holds no stamp); a name that cannot run on `device_type` is refused here."""
        stamp = runner.linear_attn_backends
        return LinearAttnBackend(
            prefill=linear_attn_kernels_for(stamp.prefill, device_type),
            decode=linear_attn_kernels_for(stamp.decode, device_type),
            verify=linear_attn_kernels_for(stamp.verify, device_type),
        )
