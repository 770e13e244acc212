"""Whether a request is done after it produced a token."""

from __future__ import annotations

from runtime_scheduler.request import FinishReason
from runtime_scheduler.request_state import RequestState


def finish_reason_of(state: RequestState, token: int, context_length: int) -> FinishReason | None:
    """ "stop" on a stop token or (unless ignored) an EOS token; "length" at max_new_tokens or at
    the context length; else None."""
    stop = state.req.stop
    if token in stop.stop_token_ids or (not stop.ignore_eos and token in stop.eos_token_ids):
        return "stop"
    if len(state.output_ids) >= stop.max_new_tokens or state.fill_len >= context_length:
        return "length"
    return None
