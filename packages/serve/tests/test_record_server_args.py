"""ServerArgs: one typed, checked attribute per leaf, provenance, sealing, projection."""

from __future__ import annotations

import typing
from pathlib import Path

import pytest

from config_bags import LeafValueError, UnknownLeafError, leaf_specs
from config_bags.server import Bags
from serve.record import ResolvedArgs, SealedRecordError, ServerArgs, codegen, project, resolve
from serve.record.resolution import Resolution

pytestmark = pytest.mark.usefixtures("unpublished")


def resolved_on(model: Path, args: ServerArgs) -> ResolvedArgs:
    """Resolve `args` serving the tiny config-only checkpoint `model` (the record tests are about
    the record; test_resolution_pipeline covers the handlers)."""
    args.model_path = str(model)
    return resolve(args)


def test_one_attribute_per_leaf_with_the_leaf_default_and_type() -> None:
    args = ServerArgs()
    hints = typing.get_type_hints(ServerArgs)
    for name, spec in leaf_specs(Bags).items():
        assert name in ServerArgs.__slots__
        assert args.value(name) == spec.default
        assert args.provenance_of(name) == "default"
        assert name in hints, f"{name} has no annotation on ServerArgs"
    assert set(args.values()) == set(leaf_specs(Bags))


def test_generated_annotations_match_the_schema() -> None:
    """The annotation block in server_args.py is exactly what the schema generates.

    Reverse-verified: deleting the `page_size: int` line from the block fails this test."""
    source = codegen.TARGET.read_text()
    assert codegen.regenerated(source) == source, "stale leaf annotations: run `uv run python -m serve.record.codegen`"


def test_keyword_leaves_are_operator_values_checked_against_the_leaf() -> None:
    args = ServerArgs(page_size=16, cuda_graph_decode_bs=(1, 2, 8))
    assert args.page_size == 16 and args.provenance_of("page_size") == "cli"
    assert args.cuda_graph_decode_bs == (1, 2, 8)
    with pytest.raises(LeafValueError, match=r"page_size.*accepted: int >= 1"):
        ServerArgs(page_size=0)
    with pytest.raises(UnknownLeafError, match="did you mean page_size"):
        ServerArgs(pag_size=16)


def test_a_refused_assignment_changes_nothing() -> None:
    args = ServerArgs(page_size=4)
    with pytest.raises(LeafValueError, match="schedule_policy"):
        args.schedule_policy = "random"  # type: ignore[assignment]
    with pytest.raises(LeafValueError):
        args.page_size = -3
    assert args.page_size == 4 and args.schedule_policy == "fcfs"
    assert args.provenance_of("schedule_policy") == "default"


def test_resolved_record_is_sealed(tiny_model: Path) -> None:
    """Reverse-verified: with the state check in ServerArgs.put removed, the assignment succeeds
    and this test fails."""
    resolved = resolved_on(tiny_model, ServerArgs(page_size=4))
    with pytest.raises(SealedRecordError, match="sealed"):
        resolved.server_args.page_size = 8
    assert resolved.server_args.page_size == 4


def test_a_handler_cannot_assign_only_declare() -> None:
    def assigning(res: Resolution) -> None:
        res.server_args.page_size = 32

    with pytest.raises(SealedRecordError, match="declare"):
        resolve(ServerArgs(), handlers=[assigning])


def test_a_handler_declares_under_its_own_name() -> None:
    def impostor(res: Resolution) -> None:
        res.declare("someone_else", page_size=32)

    with pytest.raises(RuntimeError, match="own name"):
        resolve(ServerArgs(), handlers=[impostor])


def test_resolve_leaves_its_input_open_and_unchanged(tiny_model: Path) -> None:
    args = ServerArgs(model_path=str(tiny_model))
    before = args.values(), args.provenance()
    resolved = resolve(args)
    assert (args.values(), args.provenance()) == before
    assert resolved.server_args.served_model_name == "tiny-llama" and args.served_model_name is None
    args.served_model_name = "other"  # the operator's record is still open
    assert resolved.server_args.served_model_name == "tiny-llama"


def test_projection_carries_every_leaf_into_its_bag(tiny_model: Path) -> None:
    resolved = resolved_on(tiny_model, ServerArgs(page_size=8, port=8080, schedule_policy="lpm", max_n=3, api_key="k"))
    bags = project(resolved)
    assert isinstance(bags, Bags)
    assert (bags.schedule.page_size, bags.serving.port, bags.schedule.schedule_policy) == (8, 8080, "lpm")
    for name, spec in leaf_specs(Bags).items():
        node: object = bags
        for part in spec.path:
            node = getattr(node, part)
        assert node == resolved.server_args.value(name), name


def test_projection_runs_the_bags_cross_leaf_checks() -> None:
    args = ServerArgs(speculative_ngram_min_match_window=5, speculative_ngram_max_match_window=2)
    with pytest.raises(LeafValueError, match="speculative_ngram_min_match_window"):
        args.bags()


def test_records_compare_by_values_and_provenance() -> None:
    assert ServerArgs(page_size=1) != ServerArgs(), "same value, different provenance"
    assert ServerArgs(page_size=4) == ServerArgs(page_size=4)
