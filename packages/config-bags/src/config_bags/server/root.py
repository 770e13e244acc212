"""This server's root of bags: one field per namespace, its roles, and the rules every process
that publishes it keeps, whatever the stack serves:

- `attention_page_size`: page size against the attention backends that will run (triton tiles a
  page with `tl.arange`, which takes only powers of two);
- `draft_tree_page_size`: a draft tree (topk > 1) writes each branch into its own KV slot, so it
  needs one-token pages;
- `pool_holds_a_page`, `chunk_fits_pool`, `prefill_budget_fits_pool`: the pool holds at least one
  page, one prefill chunk and one step's prefill budget;
- `expert_parallel_divides_tp`, `nodes_divide_ranks`: the parallel sizes against each other.

The rules that depend on the served checkpoint are in `model_rules`.
"""

from __future__ import annotations

from typing import ClassVar

import msgspec

from config_bags.roles import Roles
from config_bags.root import Root
from config_bags.rules import Rule, rule
from config_bags.server.bags.device import DeviceBag
from config_bags.server.bags.disagg import DisaggBag
from config_bags.server.bags.exec import ExecBag
from config_bags.server.bags.memory import MemoryBag
from config_bags.server.bags.mm import MmBag
from config_bags.server.bags.model import ModelBag
from config_bags.server.bags.observability import ObservabilityBag
from config_bags.server.bags.parallel import ParallelBag
from config_bags.server.bags.schedule import ScheduleBag
from config_bags.server.bags.serving import ServingBag
from config_bags.server.bags.spec import SpecBag
from config_bags.server.derived import attention_leaf_of, chunk_size_of
from config_bags.server.roles import SERVER_ROLES


class Bags(Root, frozen=True, kw_only=True):
    """Every namespace of this server's configuration. A stack extends it with bags of its own
    by subclassing (`class MyBags(Bags, frozen=True, kw_only=True): engine: EngineBag = ...`)."""

    ROLES: ClassVar[Roles] = SERVER_ROLES

    schedule: ScheduleBag = msgspec.field(default_factory=ScheduleBag)
    memory: MemoryBag = msgspec.field(default_factory=MemoryBag)
    model: ModelBag = msgspec.field(default_factory=ModelBag)
    parallel: ParallelBag = msgspec.field(default_factory=ParallelBag)
    spec: SpecBag = msgspec.field(default_factory=SpecBag)
    exec: ExecBag = msgspec.field(default_factory=ExecBag)
    disagg: DisaggBag = msgspec.field(default_factory=DisaggBag)
    mm: MmBag = msgspec.field(default_factory=MmBag)
    serving: ServingBag = msgspec.field(default_factory=ServingBag)
    observability: ObservabilityBag = msgspec.field(default_factory=ObservabilityBag)
    device: DeviceBag = msgspec.field(default_factory=DeviceBag)

    @rule(
        "page_size",
        "attention_backend",
        "prefill_attention_backend",
        "decode_attention_backend",
        "speculative_draft_attention_backend",
    )
    def attention_page_size(self) -> str | None:
        """Triton tiles a page with `tl.arange`: each backend that runs triton needs a power-of-two page."""
        page = self.schedule.page_size
        named = [attention_leaf_of(self.exec.kernel, half) for half in ("prefill", "decode")]
        if self.spec.speculative_draft_attention_backend is not None:
            named.append(("speculative_draft_attention_backend", self.spec.speculative_draft_attention_backend))
        for leaf, backend in named:
            if backend == "triton" and page & (page - 1):
                return f"{leaf} = {backend} requires page_size to be a power of two, got page_size = {page}"
        return None

    @rule("speculative_eagle_topk", "page_size")
    def draft_tree_page_size(self) -> str | None:
        """A draft tree writes each branch into its own KV slot."""
        topk, page = self.spec.speculative_eagle_topk, self.schedule.page_size
        if topk > 1 and page != 1:
            return f"speculative_eagle_topk = {topk} > 1 requires page_size == 1, got page_size = {page}"
        return None

    @rule("max_total_tokens", "page_size")
    def pool_holds_a_page(self) -> str | None:
        """The KV pool holds at least one page."""
        pool, page = self.memory.max_total_tokens, self.schedule.page_size
        if pool is not None and pool < page:
            return (
                f"max_total_tokens = {pool} requires max_total_tokens >= page_size (one page), got page_size = {page}"
            )
        return None

    @rule("chunked_prefill_size", "page_size", "max_total_tokens")
    def chunk_fits_pool(self) -> str | None:
        """One prefill chunk fits the KV pool."""
        pool, chunk = self.memory.max_total_tokens, chunk_size_of(self.schedule)
        if pool is not None and chunk is not None and chunk > pool:
            return (
                f"chunked_prefill_size = {self.schedule.chunked_prefill_size} requires one chunk to fit the KV pool "
                f"(at most max_total_tokens, or -1 for no chunking), got max_total_tokens = {pool}"
            )
        return None

    @rule("max_prefill_tokens", "max_total_tokens")
    def prefill_budget_fits_pool(self) -> str | None:
        """One step's prefill budget fits the KV pool."""
        pool, budget = self.memory.max_total_tokens, self.schedule.max_prefill_tokens
        if pool is not None and budget > pool:
            return (
                f"max_prefill_tokens = {budget} requires max_prefill_tokens <= max_total_tokens, "
                f"got max_total_tokens = {pool}"
            )
        return None

    @rule("ep_size", "tp_size")
    def expert_parallel_divides_tp(self) -> str | None:
        """Expert-parallel groups tile the tensor-parallel ranks."""
        ep, tp = self.exec.moe.ep_size, self.parallel.tp_size
        if tp % ep:
            return f"ep_size = {ep} requires tp_size to be a multiple of ep_size, got tp_size = {tp}"
        return None

    @rule("nnodes", "tp_size", "pp_size")
    def nodes_divide_ranks(self) -> str | None:
        """Every node runs the same number of ranks."""
        parallel = self.parallel
        nodes, ranks = parallel.nnodes, parallel.tp_size * parallel.pp_size
        if ranks % nodes:
            return (
                f"tp_size * pp_size = {parallel.tp_size} * {parallel.pp_size} = {ranks} not divisible by "
                f"nnodes = {nodes}"
            )
        return None


# This server's own invariants, as a value for code that checks a record before it publishes.
INVARIANTS: tuple[Rule, ...] = Bags.invariants()
