"""Handlers that fit the scheduler's budgets to the KV cache that was sized."""

from __future__ import annotations

from config_bags import leaf_spec
from config_bags.server import Bags
from runtime_runner import device_of
from serve.record.resolution import Resolution

PREFILL_SHARE_OF_POOL = 4
# Prompt tokens one step prefills on a CPU: about half a second of prefill on the bundled model.
CPU_PREFILL_TOKENS = 512
# Decoding requests above which a CPU step verifies no drafts: each draft is a whole row of compute
# there, and at batch 8 the verify's extra rows cost more than the accepted drafts give
# (docs/benchmarks.md, speculative decoding).
CPU_SPECULATIVE_BATCH_LIMIT = 4
# Drafts a CPU verify step takes over all its requests: a verify of 1 + 7 rows costs about 1.5
# decodes there, and four requests drafting 7 each (32 rows) cost more than their accepted drafts
# give (docs/benchmarks.md, speculative decoding).
CPU_SPECULATIVE_STEP_DRAFTS = 8


def chunked_prefill_size(res: Resolution) -> None:
    """One prefill chunk takes at most a quarter of the KV pool and no more than the context,
    in whole pages."""
    args = res.server_args
    if args.chunked_prefill_size == -1 or args.max_total_tokens is None:
        return
    page = args.page_size
    budget = min(leaf_spec("chunked_prefill_size", Bags).default, args.max_total_tokens // PREFILL_SHARE_OF_POOL)
    if args.context_length is not None:
        budget = min(budget, args.context_length)
    res.declare("chunked_prefill_size", chunked_prefill_size=max(page, budget // page * page))


def max_prefill_tokens(res: Resolution) -> None:
    """One step's prompt tokens fit the KV pool. On a CPU, which prefills about a thousand tokens
    a second, one step prefills at most 512 prompt tokens: requests already decoding keep
    streaming between steps, and a burst of prompts gets its first tokens in turn rather than all
    at the end of one long step."""
    bags = res.bags()
    budget = (
        CPU_PREFILL_TOKENS if device_of(bags.device).type == "cpu" else leaf_spec("max_prefill_tokens", Bags).default
    )
    if bags.memory.max_total_tokens is not None:
        budget = min(budget, bags.memory.max_total_tokens)
    if budget != bags.schedule.max_prefill_tokens:
        res.declare("max_prefill_tokens", max_prefill_tokens=budget)


def speculative_disable_by_batch_size(res: Resolution) -> None:
    """Speculation on a CPU verifies drafts only while a step decodes at most 4 requests: there a
    draft costs a row of compute, so at larger batches the verify's extra rows cost more than the
    accepted drafts give. Other devices, where a verify's rows ride on the decode's memory reads,
    keep no limit."""
    bags = res.bags()
    if bags.spec.speculative_algorithm is None or device_of(bags.device).type != "cpu":
        return  # (an unseeable device failed the pool's handler already)
    res.declare("speculative_disable_by_batch_size", speculative_disable_by_batch_size=CPU_SPECULATIVE_BATCH_LIMIT)


def speculative_max_drafts_per_step(res: Resolution) -> None:
    """Speculation on a CPU takes at most 8 drafts per verify step over all its requests, shared
    evenly: each draft is a row of compute there. Other devices keep no limit."""
    bags = res.bags()
    if bags.spec.speculative_algorithm is None or device_of(bags.device).type != "cpu":
        return
    res.declare("speculative_max_drafts_per_step", speculative_max_drafts_per_step=CPU_SPECULATIVE_STEP_DRAFTS)


def max_running_requests(res: Resolution) -> None:
    """No more running requests than KV pages: each running request holds at least one page."""
    args = res.server_args
    if args.max_total_tokens is None:
        return
    pages = max(1, args.max_total_tokens // args.page_size)
    res.declare(
        "max_running_requests", max_running_requests=min(leaf_spec("max_running_requests", Bags).default, pages)
    )
