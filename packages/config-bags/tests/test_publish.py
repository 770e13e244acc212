"""Publish, read through the accessors, republish, serving switch."""

import warnings

import pytest

import config_bags
import config_bags.server
from config_bags.server import Bags, ScheduleBag

ACCESSORS = [
    "get_schedule",
    "get_memory",
    "get_model",
    "get_parallel",
    "get_spec",
    "get_exec",
    "get_disagg",
    "get_mm",
    "get_serving",
    "get_observability",
    "get_device",
]


@pytest.mark.parametrize("accessor", ACCESSORS)
def test_reading_before_publish_names_the_accessor(accessor: str) -> None:
    with pytest.raises(config_bags.NotPublishedError, match=rf"{accessor}\(\) was read before publish\(\)"):
        getattr(config_bags.server, accessor)()


def test_accessors_return_the_published_typed_bags() -> None:
    bags = Bags(schedule=ScheduleBag(page_size=16, schedule_policy="lpm"))
    config_bags.publish(bags, role="standalone")
    assert config_bags.server.get_schedule() is bags.schedule
    assert config_bags.server.get_schedule().page_size == 16
    assert config_bags.server.get_exec().kernel is bags.exec.kernel
    assert config_bags.server.get_device() is bags.device
    assert config_bags.server.published_bags() is bags
    assert config_bags.published_role() == "standalone"


def test_assigning_to_a_bag_raises() -> None:
    config_bags.publish(Bags(), role="standalone")
    with pytest.raises(AttributeError, match="immutable type: 'ScheduleBag'"):
        config_bags.server.get_schedule().page_size = 4  # type: ignore[misc]
    with pytest.raises(AttributeError, match="immutable type: 'Bags'"):
        config_bags.server.published_bags().schedule = ScheduleBag()  # type: ignore[misc]
    assert config_bags.server.get_schedule().page_size == 1


def test_constructing_a_bag_checks_constraints() -> None:
    with pytest.raises(
        ValueError, match="ScheduleBag.chunked_prefill_size = 0 is not accepted; accepted: an int >= 1, or -1"
    ):
        ScheduleBag(chunked_prefill_size=0)


def test_publish_refuses_a_non_bags_value_and_an_unknown_role() -> None:
    with pytest.raises(
        TypeError, match=r"publish\(\) takes a root of bags \(an instance of a config_bags.Root subclass\), got dict"
    ):
        config_bags.publish({}, role="standalone")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown role 'gpu'; accepted: launcher, standalone, http"):
        config_bags.publish(Bags(), role="gpu")  # type: ignore[arg-type]
    assert not config_bags.is_published()


def test_publishing_again_replaces_everything_and_names_the_dropped_overrides(published: Bags) -> None:
    config_bags.override("admin", max_running_requests=4)
    config_bags.begin_serving()
    with pytest.warns(
        config_bags.RepublishWarning, match=r"dropped overrides: max_running_requests \(admin: 256 -> 4\)"
    ):
        config_bags.publish(Bags(schedule=ScheduleBag(page_size=8)), role="scheduler")
    assert config_bags.server.get_schedule().max_running_requests == 256
    assert config_bags.server.get_schedule().page_size == 8
    assert config_bags.overrides_log() == []
    assert not config_bags.is_serving()
    assert config_bags.published_role() == "scheduler"


def test_first_publish_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        config_bags.publish(Bags(), role="standalone")


def test_begin_serving_needs_published_bags() -> None:
    with pytest.raises(config_bags.NotPublishedError, match="published_root"):
        config_bags.begin_serving()


def test_unpublish_forgets_everything(published: Bags) -> None:
    config_bags.unpublish()
    assert not config_bags.is_published()
    with pytest.raises(config_bags.NotPublishedError, match="config_hash"):
        config_bags.config_hash()
