"""One request's text as the detokenizer builds it: incremental decoding, stop strings, batching
of streamed chunks (serving.stream_interval) and logprob token texts."""

from __future__ import annotations

from typing import Any

from config_bags.server import get_serving
from serve.detokenizer.incremental import IncrementalText
from serve.detokenizer.stop_strings import StopMatch
from serve.ipc.messages import FinishReason, GenerateRequest, LogprobEntry, TextOutput, TokenDelta, TokenLogprob


class RequestText:
    """The detokenizer's state for one request."""

    def __init__(self, tokenizer: Any, request: GenerateRequest) -> None:
        self.rid = request.rid
        self.replica = request.replica  # where a stop string's abort goes
        self._tokenizer = tokenizer
        self._incremental = IncrementalText(tokenizer, request.skip_special_tokens)
        self._stops = StopMatch(request.stop_strings)
        self._text = ""
        self._sent = 0  # characters of _text already forwarded
        self._completion_tokens = 0
        self._unsent_ids: list[int] = []
        self._unsent_logprobs: list[LogprobEntry] = []

    def _token_text(self, token_id: int) -> str:
        return str(self._tokenizer.decode([token_id], skip_special_tokens=False))

    def _entry(self, chosen: TokenLogprob, top: tuple[TokenLogprob, ...]) -> LogprobEntry:
        return LogprobEntry(
            token=self._token_text(chosen.token_id),
            token_id=chosen.token_id,
            logprob=chosen.logprob,
            top=tuple((self._token_text(t.token_id), t.token_id, t.logprob) for t in top),
        )

    def advance(self, out: TokenDelta) -> tuple[TextOutput | None, bool]:
        """Take one step's tokens. Returns the output to forward now (None: hold it back) and
        whether a stop string finished the request (the scheduler must then abort it)."""
        self._completion_tokens += len(out.new_ids)
        self._unsent_ids.extend(out.new_ids)
        for i, chosen in enumerate(out.logprobs):
            top = out.top_logprobs[i] if i < len(out.top_logprobs) else ()
            self._unsent_logprobs.append(self._entry(chosen, top))
        self._text += self._incremental.push(out.new_ids)
        if out.finish is not None:
            self._text += self._incremental.flush()
        match = self._stops.first_match(self._text, self._sent)
        if match is not None:
            return self._emit(out, match[0], "stop", match[1]), True
        if out.finish is not None:
            return self._emit(out, len(self._text), out.finish, out.matched_stop), False
        if len(self._unsent_ids) < get_serving().stream_interval:
            return None, False
        return self._emit(out, self._stops.safe_end(self._text), None, None), False

    def _emit(self, out: TokenDelta, end: int, finish: FinishReason | None, matched: int | str | None) -> TextOutput:
        end = max(end, self._sent)
        text = self._text[self._sent : end]
        self._sent = end
        result = TextOutput(
            rid=self.rid,
            text=text,
            new_ids=tuple(self._unsent_ids),
            finish=finish,
            matched_stop=matched,
            prompt_tokens=out.prompt_tokens,
            completion_tokens=self._completion_tokens,
            cached_tokens=out.cached_tokens,
            logprobs=tuple(self._unsent_logprobs),
            error=out.error,
            failure=out.failure,
        )
        self._unsent_ids.clear()
        self._unsent_logprobs.clear()
        return result
