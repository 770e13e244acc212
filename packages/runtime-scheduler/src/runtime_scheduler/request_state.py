"""The scheduler's mutable record of one live request: where it stands and what KV it holds.

`page_table` is the request-to-token table at page granularity: token `t` of the request's
sequence (prompt, then output) has its KV in slot `page_table[t // page_size] * page_size +
t % page_size`. The first `cached_pages` pages belong to the radix cache (locked through `node`);
the rest belong to the request.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Literal

from runtime_scheduler.grammar import TokenGrammar
from runtime_scheduler.radix_cache import RadixNode
from runtime_scheduler.request import Request

Status = Literal["waiting", "running", "finished"]


class RequestState:
    """One request inside the scheduler (never handed out: the server sees events)."""

    __slots__ = (
        "cached_pages",
        "cached_tokens",
        "fill_len",
        "grammar",
        "grammar_pending",
        "kv_len",
        "node",
        "output_ids",
        "page_table",
        "req",
        "seq",
        "restore_from",
        "snapshot_to",
        "state_slot",
        "status",
    )

    def __init__(self, req: Request, seq: int) -> None:
        self.req = req
        self.seq = seq  # arrival order; a retracted request goes back to its place
        self.status: Status = "waiting"
        self.output_ids: list[int] = []
        self.fill_len = len(req.prompt_ids)  # tokens in the sequence so far: prompt plus output
        self.page_table: list[int] = []
        self.cached_pages = 0
        self.kv_len = 0  # tokens whose KV is in the pool
        self.node: RadixNode | None = None
        self.cached_tokens: int | None = None  # prefix-cache hit at first admission
        self.state_slot: int | None = None  # a hybrid model's recurrent-state slot while running
        # A constrained request's matcher while it compiles, then the matcher itself (from admission on)
        self.grammar_pending: Future[TokenGrammar] | None = None
        self.grammar: TokenGrammar | None = None
        # A hybrid's snapshot slots (state_snapshots.py): the one its next forward restores, and
        # the one its next forward writes (-1: none).
        self.restore_from = -1
        self.snapshot_to = -1

    def append_output(self, token: int) -> None:
        """Extend the sequence by one generated token."""
        self.output_ids.append(token)
        self.fill_len += 1

    def token_slice(self, start: int, end: int) -> list[int]:
        """The sequence's token ids at positions `[start, end)`."""
        prompt = self.req.prompt_ids
        if end <= len(prompt):
            return list(prompt[start:end])
        head = list(prompt[start:]) if start < len(prompt) else []
        return head + self.output_ids[max(start - len(prompt), 0) : end - len(prompt)]

    def fill_ids(self, end: int) -> tuple[int, ...]:
        """The sequence's first `end` token ids (prompt, then output)."""
        prompt = self.req.prompt_ids
        if end <= len(prompt):
            return prompt[:end]
        return prompt + tuple(self.output_ids[: end - len(prompt)])
