"""Handlers for speculative decoding's shape."""

from __future__ import annotations

from serve.record.resolution import Resolution


def speculative_defaults(res: Resolution) -> None:
    """A draft model verifies every token its steps can propose; a tree of drafts (topk > 1)
    writes each branch into its own KV slot, so it needs one-token pages."""
    args = res.server_args
    if args.speculative_algorithm != "draft_model":
        return
    proposable = args.speculative_num_steps * args.speculative_eagle_topk + 1
    res.declare("speculative_defaults", speculative_num_draft_tokens=proposable)
    if args.speculative_eagle_topk > 1:
        res.require("speculative_defaults", "draft trees (speculative_eagle_topk > 1) need one-token pages", page_size=1)
