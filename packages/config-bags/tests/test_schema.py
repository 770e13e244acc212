"""The leaf table: unique names, every leaf declared fully, the leaves the mission names."""

import typing

import msgspec
import pytest

import config_bags
import config_bags.server
from config_bags.bag import Bag
from config_bags.leaf import leaf
from config_bags.leaf_table import walk_leaves

NAMED_BY_UPSTREAM = {
    "page_size",
    "chunked_prefill_size",
    "max_running_requests",
    "max_prefill_tokens",
    "schedule_policy",
    "attention_backend",
    "prefill_attention_backend",
    "decode_attention_backend",
    "linear_attn_backend",
    "linear_attn_prefill_backend",
    "linear_attn_decode_backend",
    "cuda_graph_decode_bs",
    "cuda_graph_max_bs",
    "speculative_algorithm",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "speculative_attention_mode",
    "speculative_draft_attention_backend",
    "enable_hierarchical_cache",
    "mm_feature_transport",
    "tp_size",
    "pp_size",
    "dp_size",
    "disaggregation_mode",
    "model_path",
    "dtype",
    "context_length",
    "kv_cache_dtype",
    "max_total_tokens",
    "host",
    "port",
    "api_key",
    "log_level",
    "enable_metrics",
    "device",
    "random_seed",
}


def test_leaf_names_are_unique_across_bags() -> None:
    """A flat flag name must map to exactly one leaf.

    Reverse-verified: adding `page_size` to MemoryBag made this fail naming both bags."""
    names = [spec.name for spec in config_bags.all_leaves(config_bags.server.Bags)]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    assert duplicates == []
    assert len(config_bags.leaf_specs(config_bags.server.Bags)) == len(names)


def test_the_leaves_the_upstream_history_names_exist() -> None:
    assert NAMED_BY_UPSTREAM - set(config_bags.leaf_specs(config_bags.server.Bags)) == set()


def test_every_namespace_of_the_mission_is_a_bag() -> None:
    assert set(config_bags.namespaces(config_bags.server.Bags)) == {
        "schedule",
        "memory",
        "model",
        "parallel",
        "spec",
        "exec.kernel",
        "exec.graph",
        "exec.moe",
        "exec.mamba",
        "exec.overlap",
        "disagg",
        "mm",
        "serving",
        "observability",
        "device",
    }


@pytest.mark.parametrize("name", sorted(config_bags.leaf_specs(config_bags.server.Bags)))
def test_every_leaf_has_help_a_valid_default_and_a_temperature(name: str) -> None:
    spec = config_bags.leaf_spec(name, config_bags.server.Bags)
    assert spec.help and "\n" not in spec.help
    assert isinstance(spec.hot, bool)
    assert config_bags.checked_value(spec, spec.default) == spec.default


def test_constraints_and_choices_are_declared_on_the_leaf() -> None:
    assert config_bags.leaf_spec("page_size", config_bags.server.Bags).accepts() == "int >= 1 and <= 2^63-1"
    assert config_bags.leaf_spec("port", config_bags.server.Bags).accepts() == "int >= 1 and <= 65535"
    assert config_bags.leaf_spec("schedule_policy", config_bags.server.Bags).choices == ("fcfs", "lpm")
    assert (
        config_bags.leaf_spec("attention_backend", config_bags.server.Bags).accepts()
        == "one of auto, torch_native, cpu_paged, triton, flashinfer, intel_amx"
    )
    assert (
        config_bags.leaf_spec("decode_attention_backend", config_bags.server.Bags)
        .accepts()
        .endswith("intel_amx, or unset")
    )
    assert config_bags.leaf_spec("max_queued_requests", config_bags.server.Bags).optional


def test_hot_and_cold_are_what_an_operator_would_expect() -> None:
    assert config_bags.leaf_spec("max_running_requests", config_bags.server.Bags).hot
    assert config_bags.leaf_spec("schedule_policy", config_bags.server.Bags).hot
    assert not config_bags.leaf_spec("page_size", config_bags.server.Bags).hot
    assert not config_bags.leaf_spec("model_path", config_bags.server.Bags).hot


def test_a_field_without_leaf_annotation_is_refused() -> None:
    class Broken(Bag, frozen=True, kw_only=True):
        size: int = 1

    with pytest.raises(TypeError, match=r"Broken.size is not declared with leaf\(\.\.\.\)"):
        walk_leaves(Broken)


def test_leaf_help_must_be_one_line() -> None:
    with pytest.raises(ValueError, match="one non-empty line"):
        leaf("two\nlines", hot=True)


def test_bags_are_frozen_structs() -> None:
    for cls in (config_bags.server.Bags, config_bags.server.ScheduleBag, config_bags.server.KernelBag):
        assert issubclass(cls, msgspec.Struct)
        assert cls.__struct_config__.frozen
    assert typing.get_type_hints(config_bags.server.Bags)["exec"] is config_bags.server.ExecBag
