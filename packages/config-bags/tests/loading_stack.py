"""A small foreign root for the loading tests, written the short way issue 41 allows: bags and
roots keyword-only and frozen without saying so, nested bags defaulted by an instance, and a
boolean leaf for `--no-x`."""

from __future__ import annotations

from typing import Annotated, Literal

from config_bags import Bag, NonEmptyStr, PositiveInt, Root, leaf, rule


class CacheBag(Bag):
    """The KV cache: block size and eviction."""

    block_size: Annotated[PositiveInt, leaf("Tokens per KV-cache block.", hot=False)] = 16
    evict: Annotated[Literal["lru", "fifo"], leaf("Which block leaves first when the cache is full.", hot=True)] = "lru"


class ApiBag(Bag):
    """The API server."""

    served_name: Annotated[NonEmptyStr, leaf("Model name the API reports.", hot=True)] = "engine"
    log_requests: Annotated[bool, leaf("Log every request.", hot=True)] = True
    max_batch: Annotated[PositiveInt | None, leaf("Most requests in one batch (unset: no cap).", hot=True)] = None


class LoadRoot(Root):
    """The foreign stack's root."""

    cache: CacheBag = CacheBag()
    api: ApiBag = ApiBag()

    @rule("max_batch", "block_size")
    def a_batch_fills_a_block(self) -> str | None:
        """A capped batch holds at least one block of tokens."""
        cap, block = self.api.max_batch, self.cache.block_size
        return (
            f"max_batch = {cap} requires max_batch >= block_size = {block}" if cap is not None and cap < block else None
        )
