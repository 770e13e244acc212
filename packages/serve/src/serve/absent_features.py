"""The features the bags can describe but this build does not have, and the leaves that wait for
them. Such a leaf set to anything but its default would be accepted and then ignored, so it is
refused instead: at resolution, at publish and on every override, by one rule per feature.

When a change builds a feature, its row goes and its leaves get their readers
(tests/test_every_leaf_acts_or_is_refused.py holds the two sides together).
"""

from __future__ import annotations

from types import MappingProxyType

from config_bags import Rule, leaf_spec, leaf_value_of
from config_bags.server import Bags

# feature (as a sentence's object: "this build has no ...") -> the leaves that configure it
ABSENT_FEATURES: MappingProxyType[str, tuple[str, ...]] = MappingProxyType(
    {
        "pipeline parallelism": ("pp_size",),
        "CUDA-graph capture (decode runs eagerly)": ("disable_cuda_graph", "cuda_graph_max_bs", "cuda_graph_decode_bs"),
        "mixture-of-experts kernel choice or expert parallelism (sparse layers run each expert in torch)": (
            "moe_runner_backend",
            "ep_size",
            "disable_shared_experts_fusion",
        ),
        "overlap scheduler (each batch is scheduled after the previous one finished)": ("disable_overlap_schedule",),
        "two-batch overlap": ("enable_two_batch_overlap",),
        "prefill/decode disaggregation": ("disaggregation_mode", "disaggregation_bootstrap_port"),
        "hierarchical (host-memory) KV cache": ("enable_hierarchical_cache", "hicache_ratio"),
        "multimodal model": ("mm_feature_transport", "mm_max_items_per_request"),
    }
)


def absent_feature_of(leaf: str) -> str | None:
    """The absent feature `leaf` configures, or None when this build reads the leaf."""
    for feature, leaves in ABSENT_FEATURES.items():
        if leaf in leaves:
            return feature
    return None


def _absent_rule(feature: str, leaves: tuple[str, ...]) -> Rule:
    def broken(bags: Bags) -> str | None:
        for leaf in leaves:
            value, default = leaf_value_of(bags, leaf), leaf_spec(leaf, Bags).default
            if value != default:
                return f"{leaf} = {value!r}: this build has no {feature}; accepted: {default!r} (the default)"
        return None

    return Rule(
        "absent_" + feature.split(" (")[0].lower().replace(" ", "_").replace("-", "_").replace("/", "_"), leaves, broken
    )


def absent_feature_rules() -> tuple[Rule, ...]:
    """One rule per absent feature: each of its leaves keeps its default."""
    return tuple(_absent_rule(feature, leaves) for feature, leaves in ABSENT_FEATURES.items())
