"""Cross-bag rules: checked at publish() and on every override() before anything is written; a
refused change leaves every bag, the hash and the log as they were."""

from __future__ import annotations

from typing import Any

import pytest

import config_bags
import config_bags.server
from config_bags import Rule, RuleBrokenError
from config_bags.server import Bags, ExecBag, KernelBag, MemoryBag, ModelBag, ParallelBag, ScheduleBag, SpecBag


def _snapshot() -> tuple[Bags, str, int]:
    return config_bags.server.published_bags(), config_bags.config_hash(), len(config_bags.overrides_log())


TRITON_DECODE = Bags(exec=ExecBag(kernel=KernelBag(decode_attention_backend="triton")))

# (rule, bags that hold it, an override that breaks it, the message it must give)
BREAKS: list[tuple[str, Bags, dict[str, Any], str]] = [
    (
        "attention_page_size",
        TRITON_DECODE,
        {"page_size": 3},
        "decode_attention_backend = triton requires page_size to be a power of two, got page_size = 3",
    ),
    (
        "draft_tree_page_size",
        Bags(schedule=ScheduleBag(page_size=16)),
        {"speculative_eagle_topk": 4},
        "speculative_eagle_topk = 4 > 1 requires page_size == 1, got page_size = 16",
    ),
    (
        "pool_holds_a_page",
        Bags(
            schedule=ScheduleBag(page_size=16, chunked_prefill_size=16, max_prefill_tokens=16),
            memory=MemoryBag(max_total_tokens=64),
        ),
        {"max_total_tokens": 8},
        "max_total_tokens = 8 requires max_total_tokens >= page_size (one page), got page_size = 16",
    ),
    (
        "chunk_fits_pool",
        Bags(
            schedule=ScheduleBag(chunked_prefill_size=64, max_prefill_tokens=64), memory=MemoryBag(max_total_tokens=100)
        ),
        {"chunked_prefill_size": 128},
        "chunked_prefill_size = 128 requires one chunk to fit the KV pool (at most max_total_tokens, or -1 for no "
        "chunking), got max_total_tokens = 100",
    ),
    (
        "prefill_budget_fits_pool",
        Bags(
            schedule=ScheduleBag(chunked_prefill_size=64, max_prefill_tokens=64), memory=MemoryBag(max_total_tokens=100)
        ),
        {"max_prefill_tokens": 101},
        "max_prefill_tokens = 101 requires max_prefill_tokens <= max_total_tokens, got max_total_tokens = 100",
    ),
    (
        "expert_parallel_divides_tp",
        Bags(),
        {"ep_size": 4},
        "ep_size = 4 requires tp_size to be a multiple of ep_size, got tp_size = 1",
    ),
    (
        "nodes_divide_ranks",
        Bags(parallel=ParallelBag(dist_init_addr="10.0.0.1:29500")),
        {"nnodes": 2},
        "tp_size * pp_size = 1 * 1 = 1 not divisible by nnodes = 2",
    ),
]


@pytest.mark.parametrize(("rule", "holding", "breaking", "message"), BREAKS, ids=[b[0] for b in BREAKS])
def test_an_override_that_breaks_a_rule_is_refused_and_changes_nothing(
    rule: str, holding: Bags, breaking: dict[str, Any], message: str
) -> None:
    """Reverse-verified: with `check_rules` dropped from with_leaves(), every override here was
    applied (the hash changed and the log grew)."""
    config_bags.publish(holding, role="standalone")
    before = _snapshot()
    heard: list[object] = []
    config_bags.on_override(heard.append)
    with pytest.raises(RuleBrokenError) as caught:
        config_bags.override("admin", **breaking)
    assert str(caught.value) == f"{message} (rule {rule})"
    assert caught.value.rule.name == rule
    assert _snapshot() == before
    assert heard == []


@pytest.mark.parametrize(("rule", "holding", "breaking", "message"), BREAKS, ids=[b[0] for b in BREAKS])
def test_publish_refuses_bags_that_break_a_rule(
    rule: str, holding: Bags, breaking: dict[str, Any], message: str
) -> None:
    """Reverse-verified: with `check_rules` dropped from publish(), each of these was published."""
    broken = config_bags.with_leaves(holding, breaking, rules=())
    with pytest.raises(RuleBrokenError, match=rf"\(rule {rule}\)$"):
        config_bags.publish(broken, role="standalone")
    assert not config_bags.is_published()


def test_the_default_bags_keep_every_invariant() -> None:
    assert config_bags.broken_rule(Bags(), config_bags.server.INVARIANTS) is None


def test_a_rule_reads_the_half_that_names_the_backend() -> None:
    """Only the leaf that names a half decides it: triton named on the base field is refused for
    page 3 under that name; a split field naming torch_native for both halves clears it."""
    base = Bags(exec=ExecBag(kernel=KernelBag(attention_backend="triton")), schedule=ScheduleBag(page_size=3))
    with pytest.raises(RuleBrokenError, match="attention_backend = triton requires page_size to be a power of two"):
        config_bags.check_rules(base, config_bags.server.INVARIANTS)
    both_split = config_bags.with_leaves(
        base, {"prefill_attention_backend": "torch_native", "decode_attention_backend": "torch_native"}, rules=()
    )
    config_bags.check_rules(both_split, config_bags.server.INVARIANTS)


def test_the_stack_publishes_rules_of_its_own_and_every_override_keeps_them() -> None:
    """A rule published with the bags (here, the model's context length) is checked like the
    invariants, and only in the process that published it."""
    config_bags.publish(Bags(), role="standalone", rules=(config_bags.server.context_length_within_model(2048),))
    assert config_bags.published_rules()[-1].name == "context_length_within_model"
    config_bags.override("admin", context_length=2048)
    before = _snapshot()
    with pytest.raises(
        RuleBrokenError,
        match=r"context_length = 4096 requires context_length <= the model's maximum, got maximum = 2048 tokens",
    ):
        config_bags.override("admin", context_length=4096)
    assert _snapshot() == before
    with pytest.raises(RuleBrokenError, match="rule context_length_within_model"):
        config_bags.publish(
            Bags(model=ModelBag(context_length=4096)),
            role="standalone",
            rules=(config_bags.server.context_length_within_model(2048),),
        )


def test_a_rule_the_stack_declares_reads_any_leaf() -> None:
    speculation_absent = Rule(
        "no_speculation",
        ("speculative_algorithm",),
        lambda bags: (
            None
            if bags.spec.speculative_algorithm is None
            else f"speculative_algorithm = {bags.spec.speculative_algorithm}: not here"
        ),
    )
    config_bags.publish(Bags(), role="standalone", rules=(speculation_absent,))
    with pytest.raises(RuleBrokenError, match=r"speculative_algorithm = ngram: not here \(rule no_speculation\)"):
        config_bags.override("admin", speculative_algorithm="ngram")
    with pytest.raises(RuleBrokenError):
        config_bags.publish(
            Bags(spec=SpecBag(speculative_algorithm="ngram")), role="standalone", rules=(speculation_absent,)
        )


def test_unpublish_forgets_the_stack_rules() -> None:
    config_bags.publish(Bags(), role="standalone", rules=(config_bags.server.context_length_within_model(16),))
    config_bags.unpublish()
    assert config_bags.published_rules() == ()
    config_bags.publish(Bags(), role="standalone")
    config_bags.override("admin", context_length=4096)
    assert config_bags.server.get_model().context_length == 4096
