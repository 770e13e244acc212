"""The rules serve publishes with its bags in every process, on top of config-bags' invariants:
no absent feature configured, attention kernels that run on this host, a decode half torch.compile
can trace when it compiles, and a context length the served model can hold. Resolution checks the
same rules, so each exists once."""

from __future__ import annotations

from attn_backends import effective_backend_name, refusal_on
from config_bags import Bags, Rule, attention_leaf_of, context_length_within_model
from runtime_runner import device_of
from runtime_runner.compiled_decode import TRACEABLE_DECODE_KERNELS

from serve.absent_features import absent_feature_rules

ATTENTION_BACKEND_LEAVES = ("attention_backend", "prefill_attention_backend", "decode_attention_backend")


def _device_type(bags: Bags) -> str:
    return device_of(bags.device).type


def _unrunnable_backend(bags: Bags) -> str | None:
    try:
        device_type = _device_type(bags)
    except RuntimeError:
        return None  # a device torch cannot see: the pool's handler names it, before any kernel matters
    for half in ("prefill", "decode"):
        leaf, name = attention_leaf_of(bags.exec.kernel, half)
        kernel = effective_backend_name(name, half=half, device_type=device_type)
        reason = refusal_on(kernel, device_type)
        if reason is not None:
            built = "" if kernel == name else f" (builds {kernel} for the {half} half)"
            return f"{leaf} = {name}{built}: {reason}"
    return None


def _untraceable_compiled_decode(bags: Bags) -> str | None:
    if not bags.exec.graph.enable_torch_compile:
        return None
    try:
        device_type = _device_type(bags)
    except RuntimeError:
        return None  # a device torch cannot see: the pool's handler names it
    leaf, name = attention_leaf_of(bags.exec.kernel, "decode")
    kernel = effective_backend_name(name, half="decode", device_type=device_type)
    if kernel in TRACEABLE_DECODE_KERNELS:
        return None
    return (f"enable_torch_compile = True compiles the decode step, which needs a decode half torch.compile can trace "
            f"({', '.join(TRACEABLE_DECODE_KERNELS)}); got {leaf} = {name}, building {kernel}")


ATTENTION_BACKENDS_RUN_HERE = Rule("attention_backends_run_here", (*ATTENTION_BACKEND_LEAVES, "device"), _unrunnable_backend)
COMPILED_DECODE_TRACEABLE = Rule(
    "compiled_decode_traceable", ("enable_torch_compile", *ATTENTION_BACKEND_LEAVES, "device"), _untraceable_compiled_decode
)


def launch_rules(model_max_length: int) -> tuple[Rule, ...]:
    """Every rule of a launch serving a model of `model_max_length` positions."""
    return (*absent_feature_rules(), ATTENTION_BACKENDS_RUN_HERE, COMPILED_DECODE_TRACEABLE,
            context_length_within_model(model_max_length))
