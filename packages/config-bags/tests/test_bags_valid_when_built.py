"""A bag is valid whenever it exists: construction checks every leaf, and publish() refuses what
another process could not decode."""

from __future__ import annotations

import typing
from typing import Any

import msgspec
import pytest

import config_bags
import config_bags.server
from config_bags import LeafSpec, LeafValueError
from config_bags.bag import Bag
from config_bags.server import Bags, ScheduleBag


class _NotALeafValue:
    """No leaf of any type accepts an instance of this class."""

    def __repr__(self) -> str:
        return "<not a leaf value>"


def _bag_class_and_path(spec: LeafSpec) -> tuple[type[Bag], tuple[str, ...]]:
    cls: Any = Bags
    for part in spec.path[:-1]:
        cls = typing.get_type_hints(cls)[part]
    return cls, spec.path[:-1]


@pytest.mark.parametrize("name", sorted(config_bags.leaf_specs(config_bags.server.Bags)))
def test_every_leaf_refuses_a_value_of_the_wrong_type_at_construction(name: str) -> None:
    """Reverse-verified: with the construction check in Bag.__post_init__ removed, every case
    constructs (the bag holds the foreign object) and this fails for all leaves."""
    spec = config_bags.leaf_spec(name, config_bags.server.Bags)
    cls, _ = _bag_class_and_path(spec)
    with pytest.raises(LeafValueError) as caught:
        cls(**{name: _NotALeafValue()})
    message = str(caught.value)
    assert message.startswith(f"{cls.__name__}.{name} = <not a leaf value> is not accepted")
    assert message.endswith(f"accepted: {spec.accepts()}")


@pytest.mark.parametrize(
    "name",
    sorted(
        n
        for n, s in config_bags.leaf_specs(config_bags.server.Bags).items()
        if "int" in s.accepts() and s.choices is None
    ),
)
def test_every_integer_leaf_is_bounded_by_64_bits(name: str) -> None:
    """The bags travel as msgpack, whose ints are 64-bit: a larger value is refused when built,
    not when a process tries to send it. Reverse-verified: without the `le=INT64_MAX` bounds in
    constraints.py, PositiveInt leaves took 2**63 and this failed."""
    spec = config_bags.leaf_spec(name, config_bags.server.Bags)
    cls, _ = _bag_class_and_path(spec)
    value: Any = (2**63,) if "list" in spec.accepts() else 2**63
    with pytest.raises(LeafValueError, match=rf"{cls.__name__}\.{name} = .*9223372036854775808.* is not accepted"):
        cls(**{name: value})


def test_the_example_of_the_issue_is_refused_naming_bag_leaf_value_and_accepted() -> None:
    with pytest.raises(LeafValueError) as caught:
        ScheduleBag(page_size=-5, max_running_requests="lots")  # type: ignore[arg-type]
    assert str(caught.value) == (
        "ScheduleBag.page_size = -5 is not accepted (Expected `int` >= 1 - at `$.page_size`); accepted: int >= 1 and "
        "<= 2^63-1"
    )


def test_a_nested_bag_must_be_an_instance_of_its_bag_type() -> None:
    with pytest.raises(
        LeafValueError, match=r"Bags.schedule = \{'page_size': 2\} is not accepted; accepted: a ScheduleBag"
    ):
        Bags(schedule={"page_size": 2})  # type: ignore[arg-type]
    with pytest.raises(LeafValueError, match="Bags.schedule = MemoryBag.* is not accepted; accepted: a ScheduleBag"):
        Bags(schedule=config_bags.server.MemoryBag())  # type: ignore[arg-type]


def test_construction_normalizes_values_as_decoding_does() -> None:
    """A list for a tuple leaf and an int for a float leaf are stored as decoding would store
    them, so the bag equals its own round trip and hashes alike."""
    graph = config_bags.server.GraphBag(cuda_graph_decode_bs=[1, 2, 4])  # type: ignore[arg-type]
    memory = config_bags.server.MemoryBag(hicache_ratio=3)
    assert graph.cuda_graph_decode_bs == (1, 2, 4) and isinstance(graph.cuda_graph_decode_bs, tuple)
    assert isinstance(memory.hicache_ratio, float)
    bags = Bags(exec=config_bags.server.ExecBag(graph=graph), memory=memory)
    assert config_bags.decode(config_bags.encode(bags), config_bags.server.Bags) == bags
    assert config_bags.hash_of(
        config_bags.decode(config_bags.encode(bags), config_bags.server.Bags)
    ) == config_bags.hash_of(bags)


def test_structs_replace_checks_like_construction() -> None:
    with pytest.raises(LeafValueError, match=r"ScheduleBag.page_size = -4 is not accepted"):
        msgspec.structs.replace(ScheduleBag(), page_size=-4)


def test_publish_refuses_bags_that_would_not_survive_the_wire() -> None:
    """A value set behind the construction check is caught by publish's round trip, and nothing
    is installed. Reverse-verified: without `_check_travels` in publish(), these bags were
    published and get_schedule() answered page_size -5."""
    bags = Bags()
    msgspec.structs.force_setattr(bags.schedule, "page_size", -5)
    with pytest.raises(
        LeafValueError, match=r"publish\(\) refused bags that do not survive encode and decode: .*page_size"
    ):
        config_bags.publish(bags, role="standalone")
    assert not config_bags.is_published()
    huge = Bags()
    msgspec.structs.force_setattr(huge.device, "random_seed", 2**70)
    with pytest.raises(LeafValueError, match="do not survive encode and decode"):
        config_bags.publish(huge, role="standalone")
    assert not config_bags.is_published()
