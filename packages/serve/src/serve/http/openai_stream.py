"""The SSE body of a streamed OpenAI response: the chunks of each output, then usage, then [DONE]."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import aclosing
from typing import Any

from serve.http.sse import DONE, sse
from serve.http.streams import ChoiceResult, fault_error, merged
from serve.http.thinking_budget import ThinkingBudget
from serve.http.usage import usage
from serve.ipc.messages import GenerateRequest, TextOutput
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.request_state import ServerFaultError

# The choice objects of one output of choice `index` (none while its text is held back).
ChoiceChunks = Callable[[int, TextOutput], list[dict[str, Any]]]
Envelope = Callable[[list[dict[str, Any]]], dict[str, Any]]


async def openai_stream(
    manager: TokenizerManager,
    requests: Sequence[GenerateRequest],
    prompt_lens: Sequence[int],
    *,
    first: Sequence[dict[str, Any]],
    choice_chunks: ChoiceChunks,
    envelope: Envelope,
    include_usage: bool,
    budget: ThinkingBudget | None = None,
) -> AsyncIterator[bytes]:
    """Chunks `envelope([choice])` for each choice in `first`, then for each choice object of each
    output (each request thinking within `budget`, if given); a usage chunk when asked; `[DONE]`.
    A server fault ends the stream with an error event."""
    results = [ChoiceResult() for _ in requests]
    try:
        for choice in first:
            yield sse(envelope([choice]))
        async with aclosing(merged(manager, requests, budget)) as outputs:
            async for index, out in outputs:
                results[index].add(out)
                for choice in choice_chunks(index, out):
                    yield sse(envelope([choice]))
    except ServerFaultError as err:
        yield sse(fault_error(err).body())
        yield DONE
        return
    if include_usage:
        final = envelope([])
        final["usage"] = usage(prompt_lens, results)
        yield sse(final)
    yield DONE
