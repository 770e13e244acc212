"""override(): checked first, swapped whole, logged, notified; refused changes change nothing."""

from typing import Any

import pytest
from refusal import assert_refused_changing_nothing

import config_bags
import config_bags.server
from config_bags import OverrideRecord
from config_bags.server import Bags


def _snapshot() -> tuple[Bags, str, int]:
    return config_bags.server.published_bags(), config_bags.config_hash(), len(config_bags.overrides_log())


def test_override_swaps_the_bag_and_every_reader_sees_it(published: Bags) -> None:
    before = config_bags.server.get_schedule()
    config_bags.override("admin", max_running_requests=4)
    assert config_bags.server.get_schedule().max_running_requests == 4
    assert before.max_running_requests == 256, "the old frozen bag is never mutated"
    assert config_bags.server.get_schedule() is not before


def test_override_logs_source_time_and_old_to_new(published: Bags) -> None:
    record = config_bags.override("admin", max_running_requests=4, schedule_policy="lpm")
    (logged,) = config_bags.overrides_log()
    assert logged == record
    assert logged.source == "admin"
    assert logged.time > 0
    assert [(c.leaf, c.old, c.new) for c in logged.changes] == [
        ("max_running_requests", 256, 4),
        ("schedule_policy", "fcfs", "lpm"),
    ]


def test_override_reaches_nested_exec_bags(published: Bags) -> None:
    kernel_before = config_bags.server.get_exec().kernel
    config_bags.override("admin", prefill_attention_backend="triton", cuda_graph_max_bs=8)
    assert config_bags.server.get_exec().kernel.prefill_attention_backend == "triton"
    assert config_bags.server.get_exec().graph.cuda_graph_max_bs == 8
    assert config_bags.server.get_exec().moe is published.exec.moe, "untouched sub-bags are shared, not copied"
    assert kernel_before.prefill_attention_backend is None


def test_subscribers_are_called_with_the_record(published: Bags) -> None:
    seen: list[OverrideRecord] = []
    unsubscribe = config_bags.on_override(seen.append)
    record = config_bags.override("admin", log_level="debug")
    assert seen == [record]
    unsubscribe()
    config_bags.override("admin", log_level="info")
    assert seen == [record]


def test_a_failing_subscriber_does_not_stop_the_others_and_is_reported(published: Bags) -> None:
    seen: list[str] = []

    def broken(record: OverrideRecord) -> None:
        raise RuntimeError("boom")

    unsubscribe_broken = config_bags.on_override(broken)
    unsubscribe_seen = config_bags.on_override(lambda r: seen.append(r.source))
    with pytest.raises(RuntimeError, match="override applied, but subscribers failed: .*broken.*boom"):
        config_bags.override("admin", log_level="debug")
    assert seen == ["admin"]
    assert config_bags.server.get_observability().log_level == "debug"
    unsubscribe_broken()
    unsubscribe_seen()


@pytest.mark.parametrize(
    ("leaves", "error", "message"),
    [
        ({"pagesize": 16}, config_bags.UnknownLeafError, r"unknown leaf 'pagesize'; did you mean page_size"),
        (
            {"page_size": "16"},
            config_bags.LeafValueError,
            r"page_size: Expected `int`, got `str` \(got '16'\); accepted: int >= 1",
        ),
        ({"page_size": 0}, config_bags.LeafValueError, r"page_size: Expected `int` >= 1 \(got 0\); accepted: int >= 1"),
        (
            {"schedule_policy": "random"},
            config_bags.LeafValueError,
            r"schedule_policy: .*'random'.*accepted: one of fcfs, lpm",
        ),
        ({"enable_metrics": 1}, config_bags.LeafValueError, r"enable_metrics: Expected `bool`, got `int`"),
        (
            {"chunked_prefill_size": 0},
            config_bags.LeafValueError,
            r"ScheduleBag.chunked_prefill_size = 0 is not accepted; accepted: an int >= 1, or -1",
        ),
        ({"max_running_requests": 8, "port": 70000}, config_bags.LeafValueError, r"port: Expected `int` <= 65535"),
        (
            {"speculative_ngram_min_match_window": 20},
            config_bags.LeafValueError,
            r"speculative_ngram_min_match_window = 20 requires speculative_ngram_min_match_window <= "
            r"speculative_ngram_max_match_window, got speculative_ngram_max_match_window = 12",
        ),
    ],
)
def test_a_refused_override_names_the_problem_and_changes_nothing(
    published: Bags, leaves: dict[str, Any], error: type[Exception], message: str
) -> None:
    config_bags.override("admin", max_prefill_tokens=4096)
    assert_refused_changing_nothing(leaves, error, message)


def test_a_cold_leaf_is_refused_while_serving_with_its_reason(published: Bags) -> None:
    config_bags.override("startup", page_size=16)  # before serving, any leaf may change
    config_bags.begin_serving()
    before = _snapshot()
    with pytest.raises(
        config_bags.ColdLeafError,
        match=r"cold leaf cannot change while serving: page_size \(schedule: Tokens per KV-cache page",
    ):
        config_bags.override("admin", max_running_requests=4, page_size=32)
    assert _snapshot() == before
    config_bags.override("admin", max_running_requests=4)
    assert config_bags.server.get_schedule().max_running_requests == 4


def test_override_needs_a_source_leaves_and_published_bags() -> None:
    with pytest.raises(config_bags.NotPublishedError):
        config_bags.override("admin", page_size=2)
    config_bags.publish(Bags(), role="standalone")
    with pytest.raises(ValueError, match="non-empty source"):
        config_bags.override("", page_size=2)
    with pytest.raises(ValueError, match="at least one leaf"):
        config_bags.override("admin")


def test_overriding_restores_on_exit_even_after_an_error(published: Bags) -> None:
    with pytest.raises(KeyError):
        with config_bags.overriding(max_running_requests=2, schedule_policy="lpm"):
            assert config_bags.server.get_schedule().max_running_requests == 2
            raise KeyError("inside")
    assert config_bags.server.get_schedule() == published.schedule
    assert [r.source for r in config_bags.overrides_log()] == ["test", "test:restore"]


def test_with_leaves_is_pure(published: Bags) -> None:
    new = config_bags.with_leaves(published, {"page_size": 64}, rules=config_bags.server.INVARIANTS)
    assert new.schedule.page_size == 64
    assert config_bags.server.get_schedule().page_size == 1
    assert config_bags.leaf_value("page_size") == 1


def test_an_override_changes_the_hash_and_reverting_restores_it(published: Bags) -> None:
    original = config_bags.config_hash()
    config_bags.override("admin", max_running_requests=4)
    assert config_bags.config_hash() != original
    config_bags.override("admin", max_running_requests=256)
    assert config_bags.config_hash() == original
