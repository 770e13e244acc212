"""Whether this runner is batch-invariant (exec.kernel.enable_deterministic_inference), refused
where it cannot be. serve's rule `deterministic_kernels` refuses the same at launch; a runner
built without serve (a test, a benchmark) is refused here."""

from __future__ import annotations

from config_bags import DETERMINISTIC_DEVICE_TYPES, deterministic_inference, get_exec

from runtime_runner.errors import UnsupportedConfigError


def batch_invariance_for(device_type: str) -> bool:
    """The published answer for a `device_type` runner: True builds the invariant linear layers
    and asks the attention factory for batch-invariant halves. Raises UnsupportedConfigError for a
    device without such kernels, or with the compiled decode step, whose fused graph rounds
    otherwise than a batch."""
    if not deterministic_inference(device_type):
        return False
    if device_type not in DETERMINISTIC_DEVICE_TYPES:
        raise UnsupportedConfigError(f"enable_deterministic_inference = True: this build has batch-invariant kernels for "
                                     f"{', '.join(DETERMINISTIC_DEVICE_TYPES)} only, not for {device_type}; accepted on "
                                     f"{device_type}: False or unset")
    if get_exec().graph.enable_torch_compile:
        raise UnsupportedConfigError("enable_deterministic_inference = True runs the decode step eagerly, but "
                                     "enable_torch_compile = True compiles it into a graph that rounds otherwise; accepted: one of the two")
    return True
