"""The rules serve publishes with its bags in every process, on top of config-bags' invariants:
no absent feature configured, only attention backends this build can build, and a context length
the served model can hold. Resolution checks the same rules, so each exists once."""

from __future__ import annotations

from attn_backends import registered_attention_backends
from config_bags import Bags, Rule, context_length_within_model

from serve.absent_features import absent_feature_rules

ATTENTION_BACKEND_LEAVES = ("attention_backend", "prefill_attention_backend", "decode_attention_backend")


def _unbuildable_backend(bags: Bags) -> str | None:
    registered = registered_attention_backends()
    kernel = bags.exec.kernel
    for leaf in ATTENTION_BACKEND_LEAVES:
        name = getattr(kernel, leaf)
        if name is not None and name not in registered:
            return f"{leaf} = {name}: this build has no {name} attention backend; accepted: {', '.join(registered)}, or unset"
    return None


REGISTERED_ATTENTION_BACKENDS = Rule("registered_attention_backends", ATTENTION_BACKEND_LEAVES, _unbuildable_backend)


def launch_rules(model_max_length: int) -> tuple[Rule, ...]:
    """Every rule of a launch serving a model of `model_max_length` positions."""
    return (*absent_feature_rules(), REGISTERED_ATTENTION_BACKENDS, context_length_within_model(model_max_length))
