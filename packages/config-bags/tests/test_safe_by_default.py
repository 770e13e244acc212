"""Issue 41, part 1: config-bags is safe by default. A root's rules travel with its type into
every process that publishes it; roles a root declares are enforced unless the operator says
otherwise; every read path goes through the role check; a root whose bags repeat a leaf name is
refused when it is defined; every error is a ConfigError; and a no-op override is not a change."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import msgspec
import pytest
from foreign_stack import ApiBag, EngineBag, EngineRoot, GuardedEngineRoot

import config_bags
import config_bags.server
from config_bags import Bag, OverrideRecord, PositiveInt, Root, leaf

HERE = Path(__file__).parent


def _child(code: str, *, data: bytes = b"", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter that can import foreign_stack; the role-check variable is
    unset unless `env` sets it, so the child runs under the default."""
    base = {k: v for k, v in os.environ.items() if k != "CONFIG_BAGS_ROLE_CHECK"} | {"PYTHONPATH": str(HERE)}
    return subprocess.run(
        [sys.executable, "-c", code], input=data.decode("latin-1"), env=base | (env or {}), capture_output=True,
        text=True, encoding="latin-1",
    )  # fmt: skip


# Rules travel with the root's type.


def test_a_rule_declared_on_the_root_holds_in_a_child_that_publishes_without_rules() -> None:
    """Reverse-verified: with `Root.invariants()` returning () the child accepted max_num_seqs=8
    and printed "accepted"."""
    data = config_bags.encode(GuardedEngineRoot(engine=EngineBag(block_size=32)))
    code = """
import sys
import config_bags
from foreign_stack import GuardedEngineRoot
config_bags.publish(config_bags.decode(sys.stdin.buffer.read(), GuardedEngineRoot), role="engine_core")
try:
    config_bags.override("admin", max_num_seqs=8)
    print("accepted")
except config_bags.RuleBrokenError as refused:
    print(refused)
"""
    done = _child(code, data=data)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == (
        "max_num_seqs = 8 requires max_num_seqs >= block_size, got block_size = 32 (rule blocks_hold_a_batch)"
    )


def test_a_root_refuses_to_publish_bags_that_break_its_own_rule() -> None:
    with pytest.raises(config_bags.RuleBrokenError, match="rule blocks_hold_a_batch"):
        config_bags.publish(GuardedEngineRoot(engine=EngineBag(max_num_seqs=8, block_size=32)), role="launcher")
    assert not config_bags.is_published()


def test_the_rules_of_a_root_are_inherited_and_a_call_site_adds_to_them() -> None:
    extra = config_bags.Rule("names_are_short", ("served_name",), lambda r: None)
    config_bags.publish(GuardedEngineRoot(), role="launcher", rules=[extra])
    assert [r.name for r in config_bags.published_rules()] == ["blocks_hold_a_batch", "names_are_short"]


# Roles are enforced by default.


def test_a_root_that_declares_roles_is_enforced_with_no_variable_set() -> None:
    """Reverse-verified: with "off" as the variable's default, the child read the api bag as
    engine_core and printed "read"."""
    code = """
import config_bags
from foreign_stack import ApiBag, EngineRoot
print(config_bags.ROLE_CHECK_MODE.value)
config_bags.publish(EngineRoot(), role="engine_core")
try:
    config_bags.bag(ApiBag)
    print("read")
except config_bags.RoleViolationError as refused:
    print(refused)
"""
    done = _child(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["enforce", "role 'engine_core' read namespace 'api'; it reads only: engine"]


@pytest.mark.parametrize("mode", ["off", "record"])
def test_off_and_record_are_chosen_explicitly(mode: str) -> None:
    code = """
import config_bags
from foreign_stack import ApiBag, EngineRoot
config_bags.publish(EngineRoot(), role="engine_core")
print(config_bags.bag(ApiBag).served_name, len(config_bags.role_violations()))
"""
    done = _child(code, env={"CONFIG_BAGS_ROLE_CHECK": mode})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["engine", "0" if mode == "off" else "1"]


# Every read path goes through the role check (this process enforces unless told otherwise).

enforcing = pytest.mark.skipif(
    config_bags.ROLE_CHECK_MODE is not config_bags.RoleCheckMode.ENFORCE, reason="this process does not enforce"
)


@enforcing
@pytest.mark.parametrize(
    ("read", "namespace"),
    [
        (lambda: config_bags.bag(ApiBag), "'api'"),
        (lambda: config_bags.leaf_value("served_name"), "'api'"),
        (config_bags.published_root, "'api'"),
        (lambda: config_bags.published_root(EngineRoot), "'api'"),
        (lambda: config_bags.accessor(EngineRoot, "api", lambda r: r.api)(), "'api'"),
    ],
    ids=["bag", "leaf_value", "published_root", "published_root_typed", "accessor"],
)
def test_every_read_path_refuses_a_namespace_the_role_does_not_read(read: object, namespace: str) -> None:
    """Reverse-verified: with leaf_value reading the root without the check, its case returned
    "engine"; with published_root unchecked, its two cases returned the root."""
    config_bags.publish(EngineRoot(), role="engine_core")
    assert callable(read)
    with pytest.raises(config_bags.RoleViolationError, match=f"role 'engine_core' read namespace {namespace}"):
        read()
    assert config_bags.bag(EngineBag).block_size == 16 and config_bags.leaf_value("block_size") == 16


@enforcing
def test_published_bags_is_checked_like_published_root() -> None:
    config_bags.publish(config_bags.server.Bags(), role="detokenizer")
    with pytest.raises(config_bags.RoleViolationError, match="role 'detokenizer' read namespace 'schedule'"):
        config_bags.server.published_bags()
    assert config_bags.published_root_unchecked(config_bags.server.Bags).schedule.page_size == 1


def test_a_read_the_role_may_make_costs_no_role_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check is decided once per publish, not per read: with the check itself made to
    explode, the engine role still reads its own bag through bag() and an accessor.

    Reverse-verified: with bag() calling check_role_read on every read, this raised."""
    get_engine = config_bags.accessor(EngineRoot, "engine", lambda r: r.engine)
    config_bags.publish(EngineRoot(), role="engine_core")

    def explode(*args: object) -> None:
        raise AssertionError("a read the role may make went through the role check")

    monkeypatch.setattr("config_bags.accessors.check_role_read", explode)
    assert config_bags.bag(EngineBag).block_size == 16 and get_engine().block_size == 16


def test_an_accessor_naming_a_namespace_the_root_lacks_is_refused_when_defined() -> None:
    """Reverse-verified: without the namespace check, accessor(EngineRoot, "engin", ...) was
    accepted and its reads were checked against a namespace no role declares."""
    with pytest.raises(config_bags.DefinitionError, match="EngineRoot has no namespace 'engin'; accepted: engine, api"):
        config_bags.accessor(EngineRoot, "engin", lambda r: r.engine)


# A leaf name declared by two bags is refused when the root is defined.


class CacheBag(Bag, frozen=True, kw_only=True):
    """A cache that also sizes blocks."""

    block_size: Annotated[PositiveInt, leaf("Tokens per cache block.", hot=False)] = 16


def test_two_bags_declaring_one_leaf_name_are_refused_at_definition_naming_both() -> None:
    """Reverse-verified: with RootMeta's check removed, the class was defined and only the
    first override naming block_size failed, with a TypeError."""
    with pytest.raises(config_bags.DefinitionError) as refused:

        class Clashing(Root, frozen=True, kw_only=True):
            engine: EngineBag = msgspec.field(default_factory=EngineBag)
            cache: CacheBag = msgspec.field(default_factory=CacheBag)

    assert str(refused.value) == (
        "Clashing: leaf 'block_size' is declared in both EngineBag (engine) and CacheBag (cache); "
        "accepted: each leaf name declared once across a root (rename one)"
    )


class LateClash(Root, frozen=True, kw_only=True):
    """Names a bag defined after it: its check waits for publish()."""

    engine: EngineBag = msgspec.field(default_factory=EngineBag)
    cache: LaterCacheBag = msgspec.field(default_factory=lambda: LaterCacheBag())


class LaterCacheBag(Bag, frozen=True, kw_only=True):
    """Defined after the root that holds it."""

    block_size: Annotated[PositiveInt, leaf("Tokens per cache block.", hot=False)] = 16


def test_a_clash_the_definition_could_not_see_is_refused_at_publish() -> None:
    with pytest.raises(config_bags.DefinitionError, match="'block_size' is declared in both EngineBag"):
        config_bags.publish(LateClash(), role="standalone")
    assert not config_bags.is_published()


# Every error is a ConfigError.


def _raise_from_subscriber(record: OverrideRecord) -> None:
    raise RuntimeError("subscriber down")


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda: config_bags.publish(EngineRoot(), role="api_servr"), config_bags.UnknownRoleError),
        (lambda: config_bags.Roles({"": {"engine"}}), config_bags.DefinitionError),
        (lambda: config_bags.Roles({"r": "engine"}), config_bags.DefinitionError),
        (lambda: leaf("two\nlines", hot=True), config_bags.DefinitionError),
        (lambda: config_bags.publish(EngineBag(), role="launcher"), config_bags.DefinitionError),  # type: ignore[arg-type]
        (lambda: config_bags.override("", max_num_seqs=3), config_bags.UsageError),
        (lambda: config_bags.override("admin"), config_bags.UsageError),
        (lambda: config_bags.published_root(config_bags.server.Bags), config_bags.WrongRootError),
    ],
    ids=[
        "unknown role",
        "empty role",
        "string reads",
        "help lines",
        "not a root",
        "no source",
        "no leaves",
        "wrong root",
    ],
)
def test_every_error_is_a_config_error(call: object, error: type[config_bags.ConfigError]) -> None:
    """Reverse-verified: with Roles.reads raising ValueError for an unknown role, the first case
    failed (a ValueError is no ConfigError)."""
    config_bags.publish(EngineRoot(), role="launcher")
    assert callable(call)
    with pytest.raises(error) as raised:
        call()
    assert isinstance(raised.value, config_bags.ConfigError)


def test_a_failing_subscriber_is_a_config_error_after_the_change_applied() -> None:
    config_bags.publish(EngineRoot(), role="launcher")
    unsubscribe = config_bags.on_override(_raise_from_subscriber)
    try:
        with pytest.raises(config_bags.SubscriberError, match="subscriber down"):
            config_bags.override("admin", max_num_seqs=64)
    finally:
        unsubscribe()
    assert config_bags.bag(EngineBag).max_num_seqs == 64


# A no-op override is not a change.


def test_an_override_to_the_current_value_changes_nothing_and_tells_no_one() -> None:
    """Reverse-verified: with the unchanged leaves kept in the record, the log held one entry
    and the subscriber heard it."""
    config_bags.publish(EngineRoot(), role="launcher")
    before = config_bags.published_root(), config_bags.config_hash()
    heard: list[OverrideRecord] = []
    unsubscribe = config_bags.on_override(heard.append)
    try:
        record = config_bags.override("admin", max_num_seqs=256, served_name="engine")
    finally:
        unsubscribe()
    assert record.changes == ()
    assert (config_bags.published_root(), config_bags.config_hash()) == before
    assert config_bags.overrides_log() == [] and heard == []


def test_an_override_lists_only_the_leaves_it_changed() -> None:
    config_bags.publish(EngineRoot(), role="launcher")
    record = config_bags.override("admin", max_num_seqs=256, served_name="engine-1")
    assert [(c.leaf, c.old, c.new) for c in record.changes] == [("served_name", "engine", "engine-1")]
    assert config_bags.overrides_log() == [record]


class RequiredCacheRoot(Root):
    """A root whose bag has no default: the caller always names it."""

    cache: CacheBag


def test_a_root_with_a_required_bag_is_defined_checked_and_published() -> None:
    """The leaf-name check at definition reads defaults off the declaration when the root has no
    default instance. Reverse-verified: reading them off `cls()` alone, defining this root
    raised TypeError (missing required argument 'cache') and this module did not collect."""
    config_bags.publish(RequiredCacheRoot(cache=CacheBag(block_size=8)), role="standalone")
    assert config_bags.leaf_value("block_size") == 8
    assert config_bags.leaf_spec("block_size", RequiredCacheRoot).default == 16
