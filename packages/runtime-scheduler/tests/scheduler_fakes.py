"""A deterministic model executor that keeps a real KV pool of token ids.

It is not the component under test: it stands in for the runner. Each input token is written to
its KV slot as (token id, position); each sampling request's context is then read back through
its page table, and the next token is a function of that context only. So a request's output
equals `reference_output(...)` exactly when the scheduler's slot bookkeeping (page tables,
shared prefix pages, out_cache_loc) is right; a page with two owners corrupts someone's context.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from config_bags import publish
from config_bags.server import Bags, ModelBag, ScheduleBag
from runtime_scheduler import BatchRequest, ForwardBatch, RequestEvent, Scheduler, StopConditions

VOCAB = 23


def next_token_of(context: Sequence[int]) -> int:
    """The model: the next token as a function of the whole context."""
    h = 0
    for t in context:
        h = (h * 1_000_003 + t + 1) % 2_147_483_647
    return h % VOCAB


def reference_output(prompt: Sequence[int], stop: StopConditions, context_length: int) -> list[int]:
    """What greedy generation with `next_token_of` produces, stop conditions applied."""
    seq = list(prompt)
    out: list[int] = []
    while True:
        token = next_token_of(seq)
        seq.append(token)
        out.append(token)
        if token in stop.stop_token_ids or (not stop.ignore_eos and token in stop.eos_token_ids):
            return out
        if len(out) >= stop.max_new_tokens or len(seq) >= context_length:
            return out


class FakeSamples(msgspec.Struct, frozen=True):
    """A verify request's samples at each position, shaped like the runner's PositionSamples."""

    token_ids: tuple[int, ...]
    logprobs: tuple[float | None, ...]
    top_logprobs: tuple[tuple[tuple[int, float], ...] | None, ...]


class FakeOutput(msgspec.Struct, frozen=True):
    """A forward's results, shaped like the runner's ForwardOutput (parallel per-request tuples)."""

    next_token_ids: tuple[int, ...]
    next_token_logprobs: tuple[float | None, ...]
    top_logprobs: tuple[tuple[tuple[int, float], ...] | None, ...]
    errors: tuple[str | None, ...]
    verified: tuple[FakeSamples, ...] | None = None


class KvFaithfulExecutor:
    """Writes tokens to slots, reads contexts back through page tables, checks the batch's shape."""

    def __init__(self, slots: int, page_size: int) -> None:
        self.kv: list[tuple[int, int] | None] = [None] * slots
        self.page_size = page_size
        self.batches: list[ForwardBatch] = []
        self.keep_batches = False

    def forward(self, batch: ForwardBatch) -> FakeOutput:
        ps = self.page_size
        n_tokens = sum(r.extend_len for r in batch.requests)
        assert len(batch.input_ids) == len(batch.positions) == len(batch.out_cache_loc) == n_tokens
        offset = 0
        for r in batch.requests:
            end = r.prefix_len + r.extend_len
            assert len(r.page_table) == -(-end // ps), (r.rid, len(r.page_table), end)
            for i in range(r.extend_len):
                pos = r.prefix_len + i
                assert batch.positions[offset + i] == pos
                slot = r.page_table[pos // ps] * ps + pos % ps
                assert batch.out_cache_loc[offset + i] == slot
                self.kv[slot] = (batch.input_ids[offset + i], pos)
            offset += r.extend_len
        if batch.forward_mode == "target_verify":
            return self._verified(batch)
        tokens: list[int] = []
        logprobs: list[float | None] = []
        tops: list[tuple[tuple[int, float], ...] | None] = []
        for r in batch.requests:
            if not r.sample:
                tokens.append(-1)
                logprobs.append(None)
                tops.append(None)
                continue
            token = next_token_of(self._context(r, r.prefix_len + r.extend_len))
            tokens.append(token)
            logprobs.append(-0.5 if r.sampling.logprobs else None)
            n = r.sampling.top_logprobs
            tops.append(tuple(((token + k) % VOCAB, -0.5 - k) for k in range(n)) if n else None)
        if self.keep_batches:
            self.batches.append(batch)
        return FakeOutput(tuple(tokens), tuple(logprobs), tuple(tops), (None,) * len(tokens))

    def _context(self, r: BatchRequest, end: int) -> list[int]:
        """Tokens [0, end) of request `r`, read back through its page table."""
        ps, context = self.page_size, []
        for pos in range(end):
            cell = self.kv[r.page_table[pos // ps] * ps + pos % ps]
            assert cell is not None and cell[1] == pos, (r.rid, pos, cell)
            context.append(cell[0])
        return context

    def _verified(self, batch: ForwardBatch) -> FakeOutput:
        """A verify's samples: at each position, the model's token after the context up to it."""
        verified = []
        for r in batch.requests:
            assert r.sample
            ids = tuple(next_token_of(self._context(r, r.prefix_len + i + 1)) for i in range(r.extend_len))
            verified.append(FakeSamples(ids, (None,) * len(ids), (None,) * len(ids)))
        if self.keep_batches:
            self.batches.append(batch)
        return FakeOutput(
            tuple(v.token_ids[-1] for v in verified),
            (None,) * len(verified),
            (None,) * len(verified),
            (None,) * len(verified),
            tuple(verified),
        )


def build(
    *, slots: int = 64, model_max_length: int = 256, context_length: int | None = None, **schedule: object
) -> tuple[Scheduler, KvFaithfulExecutor]:
    """Publish bags with these schedule leaves and build a scheduler over a KV-faithful executor."""
    bags = Bags(schedule=ScheduleBag(**schedule), model=ModelBag(context_length=context_length))  # type: ignore[arg-type]
    publish(bags, role="standalone")
    executor = KvFaithfulExecutor(slots, bags.schedule.page_size)
    return Scheduler(executor, model_max_length=model_max_length, max_total_tokens=slots), executor


class Transcript(msgspec.Struct):
    """Everything the events said, per request."""

    tokens: dict[str, list[int]]
    reasons: dict[str, str]
    cached: dict[str, int]
    steps: int
    errors: dict[str, str] = msgspec.field(default_factory=dict)


def run_to_completion(scheduler: Scheduler, *, audit: bool = True, max_steps: int = 10_000) -> Transcript:
    """Step until no work is left, auditing the pages after every step."""
    t = Transcript(tokens={}, reasons={}, cached={}, steps=0)
    while scheduler.has_work():
        record(t, scheduler.step())
        if audit:
            scheduler.audit()
        assert t.steps < max_steps, "the scheduler made no progress"
    return t


def record(t: Transcript, events: Sequence[RequestEvent]) -> None:
    """Add one step's events to the transcript."""
    t.steps += 1
    for e in events:
        assert e.rid not in t.reasons, f"event for {e.rid} after it finished"
        if e.token_id is not None:
            t.tokens.setdefault(e.rid, []).append(e.token_id)
            t.cached.setdefault(e.rid, e.cached_tokens)
        if e.finish_reason is not None:
            t.reasons[e.rid] = e.finish_reason
        if e.error is not None:
            t.errors[e.rid] = e.error


class StateFaithfulExecutor(KvFaithfulExecutor):
    """A KV-faithful executor of a hybrid model: each request's recurrent state lives in its state
    slot as the tokens it has absorbed, and every forward checks that the slot holds exactly the
    request's first prefix_len tokens (prefix_len 0: a fresh state). A verify keeps the state after
    each of its tokens; the next forward of the slot commits the one its prefix_len says, as the
    runner does."""

    def __init__(self, slots: int, page_size: int, state_slots: int) -> None:
        super().__init__(slots, page_size)
        self.states: list[tuple[int, ...]] = [()] * state_slots
        self.pending: dict[int, tuple[int, ...]] = {}  # slot -> the state after a verify's last token

    def forward(self, batch: ForwardBatch) -> FakeOutput:
        slots = [r.state_slot for r in batch.requests]
        assert all(0 <= slot < len(self.states) for slot in slots) and len(set(slots)) == len(slots), slots
        offset = 0
        for r in batch.requests:
            slot = r.state_slot
            held = self.pending.pop(slot, self.states[slot]) if r.prefix_len else ()
            assert len(held) >= r.prefix_len, (r.rid, len(held), r.prefix_len)
            state = held[: r.prefix_len]
            assert list(state) == list(r.prompt_ids + tuple(r.output_ids))[: r.prefix_len], (r.rid, r.prefix_len)
            absorbed = state + tuple(batch.input_ids[offset : offset + r.extend_len])
            if batch.forward_mode == "target_verify":
                self.pending[slot] = absorbed
                self.states[slot] = state
            else:
                self.states[slot] = absorbed
            offset += r.extend_len
        return super().forward(batch)
