"""The linear layers' backend of one runner, built from the stamp on that runner, and the factory
serve hands a runner to resolve and build it.

    factory = LinearAttnBackendFactory()
    runner.linear_attn_backends = factory.resolve(device_type="cpu", is_draft=False)   # the stamp
    backend = factory.build(runner, device_type="cpu")    # reads runner.linear_attn_backends
    backend.prefill.gated_delta_prefill(...)             # the kernels of each phase

`build` reads the attribute off the runner it is for and nothing else, so a runner built without
its stamp raises AttributeError there, and two runners in a process each run their own choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from config_bags import LinearAttnBackends

from attn_backends.linear_attn_kernels import LinearAttnKernels, linear_attn_kernels_for
from attn_backends.linear_attn_resolver import resolve_linear_attn_backends, target_prefill_default


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

    def resolve(self, *, device_type: str, is_draft: bool) -> LinearAttnBackends:
        """The runner's choice: a target's per-runner prefill default (a draft has none) under the
        operator's leaves and the device's kernels."""
        prefill_default = None if is_draft else target_prefill_default(device_type)
        return resolve_linear_attn_backends(prefill_default, device_type=device_type)

    def build(self, runner: StampedRunner, *, device_type: str) -> LinearAttnBackend:
        """The backend of the kernels `runner.linear_attn_backends` names (AttributeError when the
        runner holds no stamp); a name that cannot run on `device_type` is refused here."""
        stamp = runner.linear_attn_backends
        return LinearAttnBackend(prefill=linear_attn_kernels_for(stamp.prefill, device_type),
                                 decode=linear_attn_kernels_for(stamp.decode, device_type),
                                 verify=linear_attn_kernels_for(stamp.verify, device_type))
