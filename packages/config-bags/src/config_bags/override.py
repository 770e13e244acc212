"""Changing leaves after publish: validate every leaf first, then swap, log and notify.

The leaves are looked up in the leaf table of the published root's own type, so a stack's root,
or one extended with a bag of its own, overrides its leaves the same way.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

import msgspec

from config_bags.bag import Bag
from config_bags.errors import ColdLeafError, LeafValueError, SubscriberError, UsageError
from config_bags.leaf_table import LeafSpec
from config_bags.publish import published_root_unchecked
from config_bags.roles import check_role_read
from config_bags.root import Root
from config_bags.rules import Rule, check_rules
from config_bags.schema import leaf_spec
from config_bags.state import PROCESS, LeafChange, OverrideRecord, install

R = TypeVar("R", bound=Root)

logger = logging.getLogger("config_bags")


def checked_value(spec: LeafSpec, value: Any) -> Any:
    """`value` converted to the leaf's type, or LeafValueError naming the leaf and what it accepts."""
    try:
        return msgspec.convert(value, spec.annotation, strict=True)
    except msgspec.ValidationError as err:
        raise LeafValueError(f"{spec.name}: {err} (got {value!r}); accepted: {spec.accepts()}") from None


def with_leaves(bags: R, leaves: Mapping[str, Any], *, rules: Iterable[Rule]) -> R:
    """A new root equal to `bags` (any root; its type's leaf table names the leaves) with `leaves`
    replaced, after checking each leaf, each touched bag's cross-leaf check, and `rules` over the
    result (`published_rules()` for what an override of this process would be checked against;
    there is no default, so no caller forgets the stack's rules).

    Pure: nothing is published. Raises UnknownLeafError or LeafValueError (RuleBrokenError for a
    broken rule) and returns nothing when any leaf is refused.
    """
    by_bag: dict[tuple[str, ...], dict[str, Any]] = {}
    for name, value in leaves.items():
        spec = leaf_spec(name, type(bags))
        by_bag.setdefault(spec.path[:-1], {})[name] = checked_value(spec, value)
    new: R = _replace_nested(bags, (), by_bag)
    check_rules(new, rules)
    return new


def _replace_nested(bag: Bag, path: tuple[str, ...], by_bag: Mapping[tuple[str, ...], dict[str, Any]]) -> Any:
    changes: dict[str, Any] = dict(by_bag.get(path, {}))
    for sub_path in {p[: len(path) + 1] for p in by_bag if len(p) > len(path) and p[: len(path)] == path}:
        child = sub_path[-1]
        changes[child] = _replace_nested(getattr(bag, child), sub_path, by_bag)
    return msgspec.structs.replace(bag, **changes) if changes else bag


def _refuse_cold(names: list[str], root_type: type[Root]) -> None:
    cold = [leaf_spec(n, root_type) for n in names if not leaf_spec(n, root_type).hot]
    if cold:
        which = ", ".join(f"{s.name} ({s.namespace}: {s.help})" for s in cold)
        raise ColdLeafError(
            f"cold leaf cannot change while serving: {which}; cold leaves are fixed once begin_serving() ran, "
            "set them at launch instead"
        )


def override(source: str, **leaves: Any) -> OverrideRecord:
    """Change leaves of the published bags, all or none.

    Every leaf is checked first (it exists, its type, its constraints, each touched bag's
    cross-leaf checks, the published rules over the new bags, and after `begin_serving()` that it
    is hot). Only then are the new frozen bags installed, the change appended to
    `overrides_log()` and the subscribers called. The record lists only the leaves whose value
    changed; when none did (every leaf set to the value it holds), nothing is installed, logged
    or told, and the hash stays. A refused override raises and changes nothing.
    """
    if not source:
        raise UsageError("override() needs a non-empty source naming who asked for the change")
    if not leaves:
        raise UsageError("override() needs at least one leaf=value")
    current = published_root_unchecked(Root)
    for name in leaves:
        leaf_spec(name, type(current))
    if PROCESS.serving:
        _refuse_cold(list(leaves), type(current))
    new = with_leaves(current, leaves, rules=PROCESS.rules)
    changes = tuple(
        LeafChange(leaf=name, old=old, new=value)
        for name in leaves
        if (old := leaf_value_of(current, name)) != (value := leaf_value_of(new, name))
    )
    record = OverrideRecord(source=source, time=time.time(), changes=changes)
    if not changes:  # every leaf already held its value: nothing to install, log or tell
        return record
    install(new)
    PROCESS.log.append(record)
    logger.info("override by %s: %s", source, ", ".join(f"{c.leaf} {c.old!r} -> {c.new!r}" for c in changes))
    _notify(record)
    return record


def leaf_value_of(bags: Root, name: str) -> Any:
    """The value of one leaf, by flat name, in the root `bags`."""
    node: Any = bags
    for part in leaf_spec(name, type(bags)).path:
        node = getattr(node, part)
    return node


def leaf_value(name: str) -> Any:
    """The published value of one leaf, by flat name; a read of the leaf's namespace, so it goes
    through the role check like the accessors."""
    root = published_root_unchecked(Root)
    check_role_read(PROCESS.role, PROCESS.reads, leaf_spec(name, type(root)).path[0])
    return leaf_value_of(root, name)


def _notify(record: OverrideRecord) -> None:
    failures: list[str] = []
    for callback in list(PROCESS.subscribers):
        try:
            callback(record)
        except Exception as err:  # every subscriber hears about the change even if one fails
            failures.append(f"{getattr(callback, '__qualname__', callback)!s}: {err!r}")
    if failures:
        raise SubscriberError(f"override applied, but subscribers failed: {'; '.join(failures)}")


def overrides_log() -> list[OverrideRecord]:
    """Every override applied since the last publish, oldest first."""
    return list(PROCESS.log)


def on_override(callback: Callable[[OverrideRecord], None]) -> Callable[[], None]:
    """Call `callback(record)` after each applied override; returns a function that unsubscribes."""
    PROCESS.subscribers.append(callback)

    def unsubscribe() -> None:
        if callback in PROCESS.subscribers:
            PROCESS.subscribers.remove(callback)

    return unsubscribe


@contextmanager
def overriding(source: str = "test", **leaves: Any) -> Iterator[OverrideRecord]:
    """Override `leaves` for the duration of a `with` block, then put back the values they had."""
    record = override(source, **leaves)
    try:
        yield record
    finally:
        if record.changes:  # a no-op override has nothing to put back
            override(f"{source}:restore", **{c.leaf: c.old for c in record.changes})
