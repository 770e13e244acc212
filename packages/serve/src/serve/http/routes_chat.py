"""POST /v1/chat/completions."""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from serve.http.admission import new_rid
from serve.http.chat_choice import ChoiceStream, whole_choice
from serve.http.chat_run import prepared_chat
from serve.http.openai_stream import openai_stream
from serve.http.protocol import ChatCompletionRequest
from serve.http.streams import collect, unless_disconnected
from serve.http.usage import usage
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.served_name import served_model_name
from serve.tokenizer.worker import TokenizerWorker

router = APIRouter()


@router.post("/v1/chat/completions")
async def chat_completions(body: ChatCompletionRequest, http_request: Request) -> Any:
    """OpenAI chat completions, streamed (SSE) or whole; each choice's text read into content,
    reasoning and tool calls as the request's turn plan says (`serve.http.chat_turn`), its
    thinking within the request's budget (`serve.http.thinking_budget`)."""
    manager: TokenizerManager = http_request.app.state.manager
    worker: TokenizerWorker = http_request.app.state.tokenizer_worker
    prepared = await prepared_chat(
        body,
        worker,
        manager,
        logprobs=body.logprobs,
        top_logprobs=(body.top_logprobs or 0) if body.logprobs else 0,
        prompt_param="messages",
    )
    plan, budget, prompt, requests = prepared.plan, prepared.budget, prepared.prompt, prepared.requests
    cid, created, model = f"chatcmpl-{new_rid()}", int(time.time()), served_model_name()

    def envelope(choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": choices}

    if body.stream:
        choices = [ChoiceStream(i, plan.reading.new_turn(), body.logprobs) for i in range(len(requests))]
        first = [
            {"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None, "finish_reason": None}
            for i in range(len(requests))
        ]
        include_usage = body.stream_options is not None and body.stream_options.include_usage
        stream = openai_stream(
            manager,
            requests,
            [len(prompt)],
            first=first,
            choice_chunks=lambda index, out: choices[index].chunks(out),
            envelope=envelope,
            include_usage=include_usage,
            budget=budget,
        )
        return StreamingResponse(stream, media_type="text/event-stream")

    results = await unless_disconnected(http_request, collect(manager, requests, budget))
    response = envelope([whole_choice(i, plan.reading, r, body.logprobs) for i, r in enumerate(results)])
    response["object"] = "chat.completion"
    response["usage"] = usage([len(prompt)], results)
    return response
