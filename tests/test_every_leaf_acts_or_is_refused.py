"""No leaf is accepted and ignored: each one is read by a runtime package or serve (found by
walking their source for accessor reads, tools/leaf_readers.py), or refused at resolution and on
every override when set off its default, naming the feature this build lacks.

Reverse-verified: with the "two-batch overlap" row dropped from serve.absent_features.ABSENT_FEATURES,
`enable_two_batch_overlap` was neither read nor refused and the first test failed naming it; with
the absent-feature rules left out of both the `absent_features` handler and the launch rules,
every case of the resolution and override tests failed.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

import config_bags
import config_bags.server
from config_bags import LeafSpec, LeafValueError, leaf_spec, leaf_specs
from config_bags.server import Bags
from serve.absent_features import ABSENT_FEATURES, absent_feature_of
from serve.launch_rules import launch_rules
from serve.record import ResolutionError, ServerArgs, resolve
from serve.served_model import ServedModel

ROOT = Path(__file__).resolve().parents[1]

# Refused leaves that a runtime package already reads, and why the refusal stays.
READ_YET_REFUSED: dict[str, str] = {}


def _walker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("leaf_readers", ROOT / "tools" / "leaf_readers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["leaf_readers"] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def readers() -> dict[str, set[str]]:
    found: dict[str, set[str]] = _walker().leaf_readers(ROOT)
    return found


REFUSED = sorted(leaf for leaves in ABSENT_FEATURES.values() for leaf in leaves)


def test_every_leaf_is_read_or_refused(readers: dict[str, set[str]]) -> None:
    neither = [name for name in leaf_specs(Bags) if not readers[name] and absent_feature_of(name) is None]
    assert neither == [], f"accepted and read by nothing: {neither}; give each a reader or a row in ABSENT_FEATURES"
    both = {name for name in REFUSED if readers[name]}
    assert both == set(READ_YET_REFUSED), f"refused, yet read by { ({n: sorted(readers[n]) for n in both}) }"


def test_the_walk_finds_reads_through_accessors_aliases_and_helpers(readers: dict[str, set[str]]) -> None:
    """The walker is not vacuous: a direct read (`get_device().cpu_threads`), a read through a
    local (`model = get_model(); model.tokenizer_path`), a helper over a bag
    (`chunk_size_of(schedule)`) and a derived accessor (`attention_backends()`) are all found."""
    assert readers["cpu_threads"] == {"runtime-runner"}
    assert "serve" in readers["tokenizer_path"]
    assert "runtime-scheduler" in readers["chunked_prefill_size"]
    # the runner builds its pair from attention_backends(); attn-backends' serving_attention_backend
    # answers the configured half through it where a runner has no stamp
    assert readers["decode_attention_backend"] == {"runtime-runner", "attn-backends"}
    assert readers["enable_two_batch_overlap"] == set()


def off_default(spec: LeafSpec) -> Any:
    """A value the leaf's own type accepts that is not its default."""
    if spec.choices is not None:
        return next(c for c in spec.choices if c != spec.default)
    base = str(spec.accepts())
    if base.startswith("bool"):
        return not spec.default
    if base.startswith("list"):
        return (1, 2)
    if base.startswith("int"):
        return 2 if spec.default in (None, 1) else spec.default + 1
    if base.startswith("float"):
        return spec.default + 1.0
    return "elsewhere"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from transformers import LlamaConfig

    path = tmp_path_factory.mktemp("config-only") / "tiny"
    LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=256,
        vocab_size=64,
        architectures=["LlamaForCausalLM"],
    ).save_pretrained(path)
    return path


@pytest.mark.parametrize("leaf", REFUSED)
def test_a_refused_leaf_is_refused_at_resolution_naming_the_leaf(leaf: str, model_dir: Path) -> None:
    value = off_default(leaf_spec(leaf, Bags))
    with pytest.raises(ResolutionError) as caught:
        resolve(ServerArgs(model_path=str(model_dir), **{leaf: value}))
    assert f"{leaf} = {value!r}" in str(caught.value)


@pytest.fixture
def published_with_launch_rules() -> Iterator[Callable[[], tuple[Bags, str]]]:
    config_bags.unpublish()
    model = ServedModel(
        architecture="LlamaForCausalLM",
        max_positions=256,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=64,
        linear_attention=False,
    )
    config_bags.publish(Bags(), role="standalone", rules=launch_rules(model))
    yield lambda: (config_bags.server.published_bags(), config_bags.config_hash())
    config_bags.unpublish()


@pytest.mark.parametrize("leaf", REFUSED)
def test_a_refused_leaf_is_refused_on_override_and_nothing_changes(
    leaf: str, published_with_launch_rules: Callable[[], tuple[Bags, str]]
) -> None:
    before = published_with_launch_rules()
    value = off_default(leaf_spec(leaf, Bags))
    with pytest.raises(LeafValueError, match=rf"{leaf} = "):
        config_bags.override("admin", **{leaf: value})
    assert published_with_launch_rules() == before
    assert config_bags.overrides_log() == []


def test_every_feature_row_names_real_leaves() -> None:
    for feature, leaves in ABSENT_FEATURES.items():
        for leaf in leaves:
            assert leaf in leaf_specs(Bags), f"{feature}: {leaf} is not a leaf"
