"""Whether this runner is batch-invariant (exec.kernel.enable_deterministic_inference), refused
where it cannot be: a device without batch-invariant kernels, or the compiled decode step.
serve's rule `deterministic_kernels` states the same refusals at launch (with the attention
factory's for each half); a runner built without serve (a test, a benchmark) is refused here."""

from __future__ import annotations

from config_bags.server import DETERMINISTIC_DEVICE_TYPES, ExecBag, deterministic_inference_of, get_exec
from runtime_runner.errors import UnsupportedConfigError


def batch_invariance_refusal_of(exec: ExecBag, device_type: str) -> str | None:
    """Why deterministic inference, on under `exec` for a `device_type` runner, cannot run here
    (an operator's True: unset, it resolves off instead); None when it can or is off."""
    if not deterministic_inference_of(exec, device_type):
        return None
    if device_type not in DETERMINISTIC_DEVICE_TYPES:
        return (
            f"enable_deterministic_inference = True: this build has batch-invariant kernels for "
            f"{', '.join(DETERMINISTIC_DEVICE_TYPES)} only, not for {device_type}; accepted on {device_type}: False or "
            "unset"
        )
    if exec.graph.enable_torch_compile:
        return (
            "enable_deterministic_inference = True runs the decode step eagerly, but enable_torch_compile = True "
            "compiles it into a graph that rounds otherwise; accepted: one of the two"
        )
    return None


def batch_invariance_for(device_type: str) -> bool:
    """The published answer for a `device_type` runner: True builds the invariant linear layers
    and asks the attention factory for batch-invariant halves. Raises UnsupportedConfigError with
    `batch_invariance_refusal_of`'s reason where it cannot run."""
    exec = get_exec()
    reason = batch_invariance_refusal_of(exec, device_type)
    if reason is not None:
        raise UnsupportedConfigError(reason)
    return deterministic_inference_of(exec, device_type)
