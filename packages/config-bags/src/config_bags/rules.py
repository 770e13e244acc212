"""Rules: named invariants over the whole `Bags`, checked before any bags are installed.

A rule answers, for a candidate `Bags`, the sentence that states it with the values that break
it (`speculative_eagle_topk = 4 > 1 requires page_size == 1, got page_size = 16`), or None
while it holds. `publish()` and every `override()` check the process's rules (config-bags' own
invariants plus any the stack publishes with its bags) before anything is written, so a refused
change leaves every bag, the hash and the log as they were. A stack's launch-time resolution
calls the same rules, so each rule exists once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from config_bags.bags import Bags
from config_bags.errors import LeafValueError


@dataclass(frozen=True)
class Rule:
    """A named invariant: `broken(bags)` is the message stating the rule with its values, or None."""

    name: str
    leaves: tuple[str, ...]  # the leaves it reads, so a refusal can say where each came from
    broken: Callable[[Bags], str | None]


class RuleBrokenError(LeafValueError):
    """Bags that break a rule; `rule` is its name and the message states it with the values."""

    def __init__(self, rule: Rule, message: str) -> None:
        super().__init__(f"{message} (rule {rule.name})")
        self.rule = rule


def broken_rule(bags: Bags, rules: Iterable[Rule]) -> tuple[Rule, str] | None:
    """The first of `rules` that `bags` break, with its message; None when all hold."""
    for rule in rules:
        message = rule.broken(bags)
        if message is not None:
            return rule, message
    return None


def check_rules(bags: Bags, rules: Iterable[Rule]) -> None:
    """Raise RuleBrokenError for the first of `rules` that `bags` break."""
    found = broken_rule(bags, rules)
    if found is not None:
        raise RuleBrokenError(*found)
