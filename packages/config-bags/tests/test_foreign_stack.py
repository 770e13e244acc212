"""Issue 27: another stack's engineer declares their own bags and root (foreign_stack.py) and
hits, in order, what used to stop them: (1) the bag base and constraint types were private,
(2) publish() and the wire took only this server's `Bags`, (3) roles were seven fixed names,
(4) override() knew only the leaves of `Bags`, (5) there was no way to ask for a bag by type."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from foreign_stack import BLOCKS_HOLD_A_BATCH, ApiBag, EngineBag, EngineRoot, MyBags
from refusal import assert_refused_changing_nothing

import config_bags
import config_bags.server
from config_bags import OverrideRecord, Root
from config_bags.server import Bags, KernelBag, ScheduleBag

HERE = Path(__file__).parent


def _child(code: str, *, data: bytes = b"", mode: str = "off") -> str:
    """Run `code` in a fresh interpreter that can import foreign_stack, under role-check `mode`."""
    env = {**os.environ, "PYTHONPATH": str(HERE), "CONFIG_BAGS_ROLE_CHECK": mode}
    done = subprocess.run([sys.executable, "-c", code], input=data, env=env, capture_output=True, check=True)
    return done.stdout.decode()


# (1) What a stack needs to declare bags is public.

USER_NEEDS = [
    "Bag", "leaf", "Root", "Roles", "Rule", "bag", "accessor", "publish", "override", "on_override", "overrides_log",
    "encode", "decode", "config_hash", "published_root", "LeafValueError", "PositiveInt", "NonNegativeInt",
    "PositiveOrDisabledInt", "AboveOneFloat", "UnitFloat", "Port", "NonEmptyStr", "BatchSizes",
]  # fmt: skip


def test_a_stack_declares_its_bags_from_the_public_api_alone() -> None:
    """foreign_stack.py imports only `config_bags` itself, never one of its modules, and every
    name it takes is exported; from this server's subpackage it takes `Bags` alone, to extend it.

    Reverse-verified: with `Root` left out of `config_bags.__init__`, importing foreign_stack
    failed and this module did not collect."""
    tree = ast.parse((HERE / "foreign_stack.py").read_text())
    taken = [
        (node.module, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) for alias in node.names
    ]
    modules = {module for module, _ in taken if module and module.startswith("config_bags")}
    assert modules == {"config_bags", "config_bags.server"}
    assert {name for module, name in taken if module == "config_bags"} <= set(config_bags.__all__)
    assert {name for module, name in taken if module == "config_bags.server"} == {"Bags"}


@pytest.mark.parametrize("name", USER_NEEDS)
def test_what_a_stack_needs_is_exported_and_documented(name: str) -> None:
    """Reverse-verified: dropping "Bag" from `__all__` failed this test for Bag."""
    assert name in config_bags.__all__
    obj = getattr(config_bags, name)
    if callable(obj) and not hasattr(obj, "__metadata__"):  # a constraint alias is an Annotated type
        assert obj.__doc__, f"{name} has no docstring"


# (2) publish() and the wire take a stack's root, and a subclass of Bags.


def test_publish_takes_a_stack_root() -> None:
    root = EngineRoot(engine=EngineBag(block_size=32))
    config_bags.publish(root, role="launcher", rules=[BLOCKS_HOLD_A_BATCH])
    assert config_bags.published_root() is root
    assert config_bags.published_root(EngineRoot).engine.block_size == 32
    assert config_bags.published_rules() == (BLOCKS_HOLD_A_BATCH,)
    with pytest.raises(TypeError, match=r"published_root\(\) asked for a Bags, but the published root is EngineRoot"):
        config_bags.server.published_bags()


def test_publish_takes_bags_extended_with_a_bag_of_the_stack() -> None:
    """Reverse-verified: with the wire's decoder fixed to Bags, publish() refused MyBags (it did
    not survive encode and decode)."""
    bags = MyBags(schedule=ScheduleBag(page_size=16), engine=EngineBag(block_size=64))
    config_bags.publish(bags, role="standalone")
    assert config_bags.server.published_bags() is bags
    assert config_bags.server.get_schedule().page_size == 16
    assert config_bags.published_rules() == Bags.invariants()


def test_the_wire_decodes_the_root_type_it_is_asked_for() -> None:
    bags = MyBags(engine=EngineBag(max_num_seqs=8, block_size=8))
    data = config_bags.encode(bags)
    assert config_bags.decode(data, MyBags) == bags
    with pytest.raises(
        config_bags.WireError, match=r"bytes do not decode into valid Bags: Object contains unknown field `engine`"
    ):
        config_bags.decode(data, config_bags.server.Bags)
    with pytest.raises(config_bags.WireError, match=r"into valid EngineRoot: .*a power of two"):
        config_bags.decode(msgspec.msgpack.encode({"engine": {"block_size": 24}}), EngineRoot)
    with pytest.raises(
        TypeError, match="a root is a subclass of config_bags.Root, got <class 'foreign_stack.EngineBag'>"
    ):
        config_bags.decode(data, EngineBag)  # type: ignore[type-var]


def test_a_stack_root_round_trips_through_another_process() -> None:
    root = EngineRoot(engine=EngineBag(max_num_seqs=64, block_size=32), api=ApiBag(served_name="e1"))
    config_bags.publish(root, role="launcher")
    out = _child(
        "import sys, config_bags as c\n"
        "from foreign_stack import EngineBag, EngineRoot\n"
        "c.publish(c.decode(sys.stdin.buffer.read(), EngineRoot), role='engine_core')\n"
        "print(c.bag(EngineBag).block_size, c.config_hash())\n",
        data=config_bags.encode(root),
    )
    assert out.split() == ["32", config_bags.config_hash()]


# (3) Roles are the stack's own data.


def test_a_stack_publishes_with_its_own_roles() -> None:
    config_bags.publish(EngineRoot(), role="api_server")
    assert config_bags.published_role() == "api_server"
    assert config_bags.published_roles() == EngineRoot.ROLES
    config_bags.unpublish()
    config_bags.publish(
        Bags(), role="engine_core", roles={"engine_core": {"schedule", "memory"}, "api_server": {"serving"}}
    )
    assert config_bags.published_roles() == config_bags.Roles(
        {"engine_core": {"schedule", "memory"}, "api_server": {"serving"}}
    )


def test_a_role_the_stack_did_not_declare_is_refused() -> None:
    """Reverse-verified: with publish() no longer asking the roles table, "scheduler" was
    published for EngineRoot."""
    with pytest.raises(ValueError, match="unknown role 'scheduler'; accepted: launcher, engine_core, api_server"):
        config_bags.publish(EngineRoot(), role="scheduler")
    with pytest.raises(
        ValueError,
        match="role 'engine_core' reads schedule, which the published root does not hold; its namespaces: engine, api",
    ):
        config_bags.publish(EngineRoot(), role="engine_core", roles={"engine_core": {"schedule"}})
    with pytest.raises(
        TypeError, match="role 'engine_core' reads a collection of namespace names, got the string 'engine'"
    ):
        config_bags.Roles({"engine_core": "engine"})
    assert not config_bags.is_published()


@pytest.mark.parametrize(("mode", "expected"), [
    ("record", "engine read; violations: [('api_server', 'engine')]"),
    ("enforce", "refused: role 'api_server' read namespace 'engine'; it reads only: api"),
])  # fmt: skip
def test_role_checking_watches_a_stack_role_through_bag(mode: str, expected: str) -> None:
    """Reverse-verified: with the role check dropped from the checking `bag()`, enforce mode let
    the api_server read the engine bag."""
    out = _child(
        "import config_bags as c\n"
        "from foreign_stack import ApiBag, EngineBag, EngineRoot\n"
        "c.publish(EngineRoot(), role='api_server')\n"
        "c.bag(ApiBag).served_name\n"
        "try:\n"
        "    c.bag(EngineBag).block_size\n"
        "    print('engine read; violations:', [(v.role, v.namespace) for v in c.role_violations()])\n"
        "except c.RoleViolationError as err:\n"
        "    print('refused:', err)\n",
        mode=mode,
    )
    assert out.strip() == expected


def test_this_servers_everything_roles_read_an_extension_bag() -> None:
    """The launcher and a standalone build read every namespace of the published root, a stack's
    bag added to Bags included; the other roles of this server read what they always did."""
    out = _child(
        "import config_bags as c\n"
        "from config_bags.server import get_schedule\n"
        "from foreign_stack import EngineBag, MyBags\n"
        "c.publish(MyBags(), role='standalone')\n"
        "c.bag(EngineBag).block_size\n"
        "c.unpublish()\n"
        "c.publish(MyBags(), role='scheduler')\n"
        "get_schedule().page_size\n"
        "c.bag(EngineBag).block_size\n"
        "print([(v.role, v.namespace) for v in c.role_violations()])\n",
        mode="record",
    )
    assert out.strip() == "[('scheduler', 'engine')]"


# (4) override() walks the published root's own leaves.


def test_override_changes_a_leaf_of_a_stack_root_and_tells_subscribers() -> None:
    """Reverse-verified: with the leaf table walking Bags again, this raised UnknownLeafError."""
    config_bags.publish(EngineRoot(), role="engine_core", rules=[BLOCKS_HOLD_A_BATCH])
    before = config_bags.config_hash()
    heard: list[OverrideRecord] = []
    config_bags.on_override(heard.append)
    record = config_bags.override("admin", block_size=32)
    assert config_bags.bag(EngineBag).block_size == 32
    assert [(c.leaf, c.old, c.new) for c in record.changes] == [("block_size", 16, 32)]
    assert heard == [record] == config_bags.overrides_log()
    assert config_bags.config_hash() != before
    assert config_bags.leaf_value("block_size") == 32


def test_override_changes_a_leaf_of_the_stack_bag_added_to_bags() -> None:
    config_bags.publish(MyBags(), role="standalone")
    config_bags.override("admin", block_size=32, page_size=16)
    assert config_bags.bag(EngineBag).block_size == 32
    assert config_bags.server.get_schedule().page_size == 16
    assert isinstance(config_bags.server.published_bags(), MyBags)


@pytest.mark.parametrize(("leaves", "error", "message"), [
    ({"block_size": 24}, config_bags.LeafValueError, "EngineBag.block_size = 24 is not accepted; accepted: a power of"),
    ({"max_num_seqs": 8}, config_bags.RuleBrokenError,
     r"max_num_seqs = 8 requires max_num_seqs >= block_size, got block_size = 16 \(rule blocks_hold_a_batch\)"),
    ({"max_num_seqs": 0}, config_bags.LeafValueError, "max_num_seqs: Expected `int` >= 1"),
    ({"page_size": 16}, config_bags.UnknownLeafError, r"unknown leaf 'page_size'; EngineRoot declares no such leaf"),
])  # fmt: skip
def test_a_refused_override_of_a_stack_root_changes_nothing(
    leaves: dict[str, Any], error: type[Exception], message: str
) -> None:
    config_bags.publish(EngineRoot(), role="engine_core", rules=[BLOCKS_HOLD_A_BATCH])
    assert_refused_changing_nothing(leaves, error, message)


def test_a_stack_root_has_its_own_leaf_table() -> None:
    assert list(config_bags.leaf_specs(EngineRoot)) == ["max_num_seqs", "block_size", "served_name"]
    assert config_bags.namespaces(EngineRoot) == ("engine", "api")
    assert set(config_bags.leaf_specs(MyBags)) == {
        *config_bags.leaf_specs(config_bags.server.Bags),
        "max_num_seqs",
        "block_size",
    }
    assert config_bags.leaf_spec("block_size", EngineRoot).accepts() == "int >= 1 and <= 2^63-1"


# (5) A bag by its type.


def test_bag_finds_a_bag_by_type_wherever_the_root_holds_it() -> None:
    """Reverse-verified: with `bag_paths` not walking into nested bags, bag(KernelBag) raised
    UnknownBagError."""
    config_bags.publish(MyBags(engine=EngineBag(block_size=8, max_num_seqs=8)), role="standalone")
    assert config_bags.bag(EngineBag).block_size == 8
    assert config_bags.bag(KernelBag) is config_bags.server.get_exec().kernel
    assert config_bags.bag(ScheduleBag) is config_bags.server.get_schedule()
    config_bags.override("admin", block_size=4)
    assert config_bags.bag(EngineBag).block_size == 4, "bag() follows an override"


def test_bag_of_a_type_the_root_does_not_hold_names_those_it_does() -> None:
    with pytest.raises(config_bags.NotPublishedError, match=r"bag\(EngineBag\) was read before publish\(\)"):
        config_bags.bag(EngineBag)
    config_bags.publish(EngineRoot(), role="launcher")
    with pytest.raises(
        config_bags.UnknownBagError,
        match=r"bag\(ScheduleBag\): the published EngineRoot holds no ScheduleBag; it holds: EngineBag, ApiBag",
    ):
        config_bags.bag(ScheduleBag)
    with pytest.raises(
        config_bags.UnknownBagError,
        match=r"get_schedule\(\) reads a Bags root, but the published root is EngineRoot; "
        r"ask bag\(kind\) for one of its bags: EngineBag, ApiBag",
    ):
        config_bags.server.get_schedule()


class Marker(config_bags.Bag, frozen=True, kw_only=True):
    """No leaves: a bag that only groups."""


class TwoMarkers(Root, frozen=True, kw_only=True):
    """One leafless bag type held at two places."""

    prefill: Marker = msgspec.field(default_factory=Marker)
    decode: Marker = msgspec.field(default_factory=Marker)


def test_bag_of_a_type_held_twice_names_both_places() -> None:
    """A bag type with leaves held twice is refused when the root is defined (its leaf names
    repeat); one without leaves may be held twice, and bag() then says where it is."""
    config_bags.publish(TwoMarkers(), role="standalone")
    with pytest.raises(
        config_bags.UnknownBagError, match=r"bag\(Marker\) is ambiguous: TwoMarkers holds it at prefill, decode"
    ):
        config_bags.bag(Marker)


def test_a_stack_makes_its_own_named_accessor() -> None:
    get_engine = config_bags.accessor(EngineRoot, "engine", lambda root: root.engine)
    config_bags.publish(EngineRoot(engine=EngineBag(block_size=64)), role="engine_core")
    assert get_engine().block_size == 64
    config_bags.override("admin", block_size=128)
    assert get_engine().block_size == 128
