"""Rules: named invariants over a whole root of bags, checked before any bags are installed.

A rule answers, for a candidate root of the stack it was written for, the sentence that
states it with the values that break it (`speculative_eagle_topk = 4 > 1 requires page_size == 1,
got page_size = 16`), or None while it holds. `publish()` and every `override()` check the
process's rules (the root's own invariants plus any the stack publishes with its bags) before
anything is written, so a refused change leaves every bag, the hash and the log as they were. A
stack's launch-time resolution calls the same rules, so each rule exists once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from config_bags.bag import Bag
from config_bags.errors import LeafValueError


@dataclass(frozen=True)
class Rule:
    """A named invariant: `broken(root)` is the message stating the rule with its values, or None.
    `broken` takes the root it was written for (annotate its parameter with that root type)."""

    name: str
    leaves: tuple[str, ...]  # the leaves it reads, so a refusal can say where each came from
    # Any: a rule is written for one root type, and Rule is not generic so that the stacks
    # already annotating `Rule` keep type-checking.
    broken: Callable[[Any], str | None]


class RuleBrokenError(LeafValueError):
    """Bags that break a rule; `rule` is its name and the message states it with the values."""

    def __init__(self, rule: Rule, message: str) -> None:
        super().__init__(f"{message} (rule {rule.name})")
        self.rule = rule


def broken_rule(bags: Bag, rules: Iterable[Rule]) -> tuple[Rule, str] | None:
    """The first of `rules` that `bags` break, with its message; None when all hold."""
    for rule in rules:
        message = rule.broken(bags)
        if message is not None:
            return rule, message
    return None


def check_rules(bags: Bag, rules: Iterable[Rule]) -> None:
    """Raise RuleBrokenError for the first of `rules` that `bags` break."""
    found = broken_rule(bags, rules)
    if found is not None:
        raise RuleBrokenError(*found)


def rule(*leaves: str) -> Callable[[Callable[[Any], str | None]], Rule]:
    """Declare a rule on a root, as a method answering the broken rule's sentence or None:

        class EngineRoot(Root):
            @rule("max_num_seqs", "block_size")
            def blocks_hold_a_batch(self) -> str | None: ...

    `leaves` are the leaves it reads. The method becomes a `Rule` named after it, which the
    root's `invariants()` returns, so every process publishing the root keeps it."""

    def declare(broken: Callable[[Any], str | None]) -> Rule:
        return Rule(broken.__name__, leaves, broken)

    return declare
