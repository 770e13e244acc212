"""POST /v1/completions."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from serve.http.admission import generate_requests, new_rid
from serve.http.errors import bad_request
from serve.http.logprobs_format import completion_logprobs
from serve.http.openai_stream import openai_stream
from serve.http.output_constraints import output_constraint
from serve.http.protocol import CompletionRequest
from serve.http.streams import collect, unless_disconnected
from serve.http.usage import usage
from serve.ipc.messages import TextOutput
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.served_name import served_model_name
from serve.tokenizer.worker import TokenizerWorker

router = APIRouter()

# OpenAI's default for the legacy completions endpoint.
DEFAULT_COMPLETION_TOKENS = 16


async def prompt_ids(
    worker: TokenizerWorker, prompt: str | list[str] | list[int] | list[list[int]]
) -> list[Sequence[int]]:
    """The token ids of each prompt (text is tokenized with the model's special tokens, in the
    tokenizer worker)."""
    if isinstance(prompt, str):
        prompt = [prompt]
    if not prompt:
        raise bad_request("the prompt is empty; send a non-empty string, list of strings, or token ids", param="prompt")
    if all(isinstance(p, int) for p in prompt):
        return [[int(t) for t in prompt]]  # type: ignore[arg-type]
    texts = [p for p in prompt if isinstance(p, str)]
    if any(not text for text in texts):
        raise bad_request("the prompt is empty; send at least one character or token", param="prompt")
    encoded = iter(await worker.encode(texts) if texts else ())
    return [next(encoded) if isinstance(p, str) else [int(t) for t in p] for p in prompt]  # type: ignore[union-attr]


@router.post("/v1/completions")
async def completions(body: CompletionRequest, http_request: Request) -> Any:
    """OpenAI text completions, streamed (SSE) or whole."""
    manager: TokenizerManager = http_request.app.state.manager
    constraint = await output_constraint(body)
    prompts = await prompt_ids(http_request.app.state.tokenizer_worker, body.prompt)
    requests = generate_requests(
        body,
        prompts,
        manager,
        default_max_tokens=DEFAULT_COMPLETION_TOKENS,
        logprobs=body.logprobs is not None,
        top_logprobs=body.logprobs or 0,
        constraint=constraint,
    )
    prompt_lens = [len(p) for p in prompts]
    cid, created, model = f"cmpl-{new_rid()}", int(time.time()), served_model_name()

    def envelope(choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {"id": cid, "object": "text_completion", "created": created, "model": model, "choices": choices}

    if body.stream:
        offsets = [0] * len(requests)

        def choice_chunks(index: int, out: TextOutput) -> list[dict[str, Any]]:
            if not (out.text or out.logprobs or out.finish is not None):
                return []  # text still held back waits
            logprobs = completion_logprobs(out.logprobs, offsets[index]) if body.logprobs is not None else None
            offsets[index] += sum(len(e.token) for e in out.logprobs)
            return [
                {
                    "index": index,
                    "text": out.text,
                    "logprobs": logprobs,
                    "finish_reason": out.finish,
                    "matched_stop": out.matched_stop,
                }
            ]

        include_usage = body.stream_options is not None and body.stream_options.include_usage
        stream = openai_stream(
            manager,
            requests,
            prompt_lens,
            first=(),
            choice_chunks=choice_chunks,
            envelope=envelope,
            include_usage=include_usage,
        )
        return StreamingResponse(stream, media_type="text/event-stream")

    results = await unless_disconnected(http_request, collect(manager, requests))
    response = envelope(
        [
            {
                "index": i,
                "text": r.text,
                "logprobs": completion_logprobs(r.logprobs) if body.logprobs is not None else None,
                "finish_reason": r.finish,
                "matched_stop": r.matched_stop,
            }
            for i, r in enumerate(results)
        ]
    )
    response["usage"] = usage(prompt_lens, results)
    return response
