"""Assembling one step's ForwardBatch from the requests the step planned."""

from __future__ import annotations

from collections.abc import Sequence

from config_bags.server import get_schedule
from runtime_scheduler.batch import BatchRequest, ForwardBatch, ForwardMode
from runtime_scheduler.request_state import RequestState

Extend = tuple[RequestState, int]  # a request and how many tokens it computes this step


def forward_batch_of(
    extends: list[Extend], decodes: list[RequestState], drafts: Sequence[Sequence[int]] | None = None
) -> ForwardBatch:
    """The batch for this step's extends (each with its token count) followed by its decodes; with
    `drafts` (one list per decode, on a step without extends) a target_verify batch in which each
    decode computes its last token and then its drafts."""
    input_ids: list[int] = []
    positions: list[int] = []
    locs: list[int] = []
    entries: list[BatchRequest] = []
    for s, ext in extends:
        start, end = s.kv_len, s.kv_len + ext
        input_ids.extend(s.token_slice(start, end))
        positions.extend(range(start, end))
        locs.extend(slots_of(s.page_table, start, end))
        entries.append(_entry(s, ext, end == s.fill_len))
    for i, s in enumerate(decodes):
        pos = s.kv_len
        own = () if drafts is None else drafts[i]
        input_ids.append(s.output_ids[-1] if s.output_ids else s.req.prompt_ids[-1])
        input_ids.extend(own)
        positions.extend(range(pos, pos + 1 + len(own)))
        locs.extend(slots_of(s.page_table, pos, pos + 1 + len(own)))
        entries.append(_entry(s, 1 + len(own), True))
    mode: ForwardMode = "mixed" if extends and decodes else ("extend" if extends else "decode")
    if drafts is not None:
        assert not extends, "a verify step carries no prompt work"
        mode = "target_verify"
    return ForwardBatch(
        forward_mode=mode, input_ids=input_ids, positions=positions, out_cache_loc=locs, requests=entries
    )


def _entry(s: RequestState, ext: int, sample: bool) -> BatchRequest:
    """Request `s`'s part of the batch: `ext` tokens after the `s.kv_len` already in the pool."""
    return BatchRequest(
        rid=s.req.rid,
        prefix_len=s.kv_len,
        extend_len=ext,
        page_table=s.page_table,
        sample=sample,
        sampling=s.req.sampling,
        prompt_ids=s.req.prompt_ids,
        output_ids=s.output_ids,
        state_slot=-1 if s.state_slot is None else s.state_slot,
        grammar=s.grammar,
        restore_from=s.restore_from,
        snapshot_to=s.snapshot_to,
    )


def slots_of(page_table: Sequence[int], start: int, end: int) -> list[int]:
    """The KV slots of tokens `[start, end)` under `page_table`."""
    page_size = get_schedule().page_size
    if page_size == 1:
        return list(page_table[start:end])
    slots: list[int] = []
    pos = start
    while pos < end:
        page, offset = divmod(pos, page_size)
        base = page_table[page] * page_size
        stop = min(end - pos, page_size - offset)
        slots.extend(range(base + offset, base + offset + stop))
        pos += stop
    return slots
