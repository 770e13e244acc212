"""Another inference stack's configuration, declared from `config_bags`'s public API alone: its
own root (an engine bag, an API bag, its roles, a rule), and this server's `Bags` extended with
the same engine bag. The tests of issue 27 publish, override, read and ship both."""

from __future__ import annotations

from typing import Annotated, ClassVar

import msgspec

from config_bags import Bag, LeafValueError, NonEmptyStr, PositiveInt, Roles, Root, Rule, leaf, rule
from config_bags.server import Bags


class EngineBag(Bag, frozen=True, kw_only=True):
    """The engine core's batch and KV-block sizes."""

    max_num_seqs: Annotated[PositiveInt, leaf("Most sequences in one batch.", hot=True)] = 256
    block_size: Annotated[PositiveInt, leaf("Tokens per KV-cache block.", hot=False)] = 16

    def check_leaves_together(self) -> None:
        if self.block_size & (self.block_size - 1):
            raise LeafValueError(f"EngineBag.block_size = {self.block_size} is not accepted; accepted: a power of two")


class ApiBag(Bag, frozen=True, kw_only=True):
    """The API server's name for the model."""

    served_name: Annotated[NonEmptyStr, leaf("Model name the API reports.", hot=True)] = "engine"


class EngineRoot(Root, frozen=True, kw_only=True):
    """The foreign stack's root: two namespaces, its own roles."""

    ROLES: ClassVar[Roles] = Roles({"engine_core": {"engine"}, "api_server": {"api"}}, everything=("launcher",))

    engine: EngineBag = msgspec.field(default_factory=EngineBag)
    api: ApiBag = msgspec.field(default_factory=ApiBag)


def _blocks_hold_a_batch(root: EngineRoot) -> str | None:
    engine = root.engine
    if engine.max_num_seqs < engine.block_size:
        seqs, block = engine.max_num_seqs, engine.block_size
        return f"max_num_seqs = {seqs} requires max_num_seqs >= block_size, got block_size = {block}"
    return None


BLOCKS_HOLD_A_BATCH = Rule("blocks_hold_a_batch", ("max_num_seqs", "block_size"), _blocks_hold_a_batch)


class MyBags(Bags, frozen=True, kw_only=True):
    """This server's bags and the foreign engine bag, without forking either."""

    engine: EngineBag = msgspec.field(default_factory=EngineBag)


class GuardedEngineRoot(EngineRoot, frozen=True, kw_only=True):
    """The foreign root with its rule declared on the type, so every process publishing it
    keeps the rule, told or not."""

    @rule("max_num_seqs", "block_size")
    def blocks_hold_a_batch(self) -> str | None:
        """A batch fills at least one KV block."""
        return _blocks_hold_a_batch(self)
