"""config-bags' own cross-bag invariants, true of any stack that reads these bags.

- `attention_page_size`: page size against the attention backends that will run (triton tiles a
  page with `tl.arange`, which takes only powers of two);
- `draft_tree_page_size`: a draft tree (topk > 1) writes each branch into its own KV slot, so it
  needs one-token pages;
- `pool_holds_a_page`, `chunk_fits_pool`, `prefill_budget_fits_pool`: the pool holds at least one
  page, one prefill chunk and one step's prefill budget;
- `expert_parallel_divides_tp`, `nodes_divide_ranks`: the parallel sizes against each other;
- `context_length_within_model(n)`: the context length against the model's maximum, a fact of
  the served checkpoint, so the stack that knows it publishes this rule with its bags.
"""

from __future__ import annotations

from config_bags.bags import Bags
from config_bags.derived import attention_leaf_of, chunk_size_of, context_length_refusal, snapshot_grid_refusal
from config_bags.rules import Rule


def _backend_leaves(bags: Bags) -> list[tuple[str, str]]:
    """(leaf that named it, backend) for each attention backend that will run: each half's split
    field when set, else the base field; and the draft runner's when set."""
    named: list[tuple[str, str]] = [attention_leaf_of(bags.exec.kernel, half) for half in ("prefill", "decode")]
    if bags.spec.speculative_draft_attention_backend is not None:
        named.append(("speculative_draft_attention_backend", bags.spec.speculative_draft_attention_backend))
    return named


def _attention_page_size(bags: Bags) -> str | None:
    page = bags.schedule.page_size
    for leaf, backend in _backend_leaves(bags):
        if backend == "triton" and page & (page - 1):
            return f"{leaf} = {backend} requires page_size to be a power of two, got page_size = {page}"
    return None


def _draft_tree_page_size(bags: Bags) -> str | None:
    topk, page = bags.spec.speculative_eagle_topk, bags.schedule.page_size
    if topk > 1 and page != 1:
        return f"speculative_eagle_topk = {topk} > 1 requires page_size == 1, got page_size = {page}"
    return None


def _pool_holds_a_page(bags: Bags) -> str | None:
    pool, page = bags.memory.max_total_tokens, bags.schedule.page_size
    if pool is not None and pool < page:
        return f"max_total_tokens = {pool} requires max_total_tokens >= page_size (one page), got page_size = {page}"
    return None


def _chunk_fits_pool(bags: Bags) -> str | None:
    pool, chunk = bags.memory.max_total_tokens, chunk_size_of(bags.schedule)
    if pool is not None and chunk is not None and chunk > pool:
        return (
            f"chunked_prefill_size = {bags.schedule.chunked_prefill_size} requires one chunk to fit the KV pool "
            f"(at most max_total_tokens, or -1 for no chunking), got max_total_tokens = {pool}"
        )
    return None


def _prefill_budget_fits_pool(bags: Bags) -> str | None:
    pool, budget = bags.memory.max_total_tokens, bags.schedule.max_prefill_tokens
    if pool is not None and budget > pool:
        return (
            f"max_prefill_tokens = {budget} requires max_prefill_tokens <= max_total_tokens, got max_total_tokens = "
            f"{pool}"
        )
    return None


def _expert_parallel_divides_tp(bags: Bags) -> str | None:
    ep, tp = bags.exec.moe.ep_size, bags.parallel.tp_size
    if tp % ep:
        return f"ep_size = {ep} requires tp_size to be a multiple of ep_size, got tp_size = {tp}"
    return None


def _nodes_divide_ranks(bags: Bags) -> str | None:
    parallel = bags.parallel
    nodes, ranks = parallel.nnodes, parallel.tp_size * parallel.pp_size
    if ranks % nodes:
        return (
            f"tp_size * pp_size = {parallel.tp_size} * {parallel.pp_size} = {ranks} not divisible by nnodes = {nodes}"
        )
    return None


INVARIANTS: tuple[Rule, ...] = (
    Rule(
        "attention_page_size",
        (
            "page_size",
            "attention_backend",
            "prefill_attention_backend",
            "decode_attention_backend",
            "speculative_draft_attention_backend",
        ),
        _attention_page_size,
    ),
    Rule("draft_tree_page_size", ("speculative_eagle_topk", "page_size"), _draft_tree_page_size),
    Rule("pool_holds_a_page", ("max_total_tokens", "page_size"), _pool_holds_a_page),
    Rule("chunk_fits_pool", ("chunked_prefill_size", "page_size", "max_total_tokens"), _chunk_fits_pool),
    Rule("prefill_budget_fits_pool", ("max_prefill_tokens", "max_total_tokens"), _prefill_budget_fits_pool),
    Rule("expert_parallel_divides_tp", ("ep_size", "tp_size"), _expert_parallel_divides_tp),
    Rule("nodes_divide_ranks", ("nnodes", "tp_size", "pp_size"), _nodes_divide_ranks),
)


# A hybrid model's snapshots lie on the page and chunk grid (serve adds it for such a model).
SNAPSHOT_GRID = Rule(
    "snapshot_interval_on_grid",
    ("mamba_snapshot_interval", "page_size", "chunked_prefill_size"),
    lambda bags: snapshot_grid_refusal(bags.exec.mamba, bags.schedule),
)


def context_length_within_model(model_max_length: int) -> Rule:
    """The rule that the served context length does not exceed the model's own maximum."""
    return Rule(
        "context_length_within_model",
        ("context_length",),
        lambda bags: context_length_refusal(bags.model, model_max_length),
    )
