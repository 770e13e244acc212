"""POST /v1/chat/completions."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from jinja2 import TemplateError

from serve.http.admission import generate_requests, new_rid
from serve.http.errors import bad_request
from serve.http.logprobs_format import chat_logprobs
from serve.http.openai_stream import openai_stream
from serve.http.output_constraints import output_constraint
from serve.http.protocol import ChatCompletionRequest, ChatMessage
from serve.http.streams import collect, unless_disconnected
from serve.http.usage import usage
from serve.ipc.messages import TextOutput
from serve.tokenizer.chat_template import NoChatTemplateError
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.served_name import served_model_name
from serve.tokenizer.worker import TokenizerWorker

router = APIRouter()


async def rendered_prompt(worker: TokenizerWorker, messages: Sequence[ChatMessage]) -> Sequence[int]:
    """The conversation's prompt ids, rendered in the tokenizer worker; a missing chat template,
    or one that refuses the conversation (many raise on roles out of order), is the client's 400."""
    try:
        return await worker.chat_prompt([m.template_message() for m in messages])
    except NoChatTemplateError as err:
        raise bad_request(str(err), param="messages") from None
    except TemplateError as err:
        raise bad_request(f"the model's chat template refused these messages: {err}", param="messages") from None


@router.post("/v1/chat/completions")
async def chat_completions(body: ChatCompletionRequest, http_request: Request) -> Any:
    """OpenAI chat completions, streamed (SSE) or whole."""
    manager: TokenizerManager = http_request.app.state.manager
    constraint = await output_constraint(body)
    prompt = await rendered_prompt(http_request.app.state.tokenizer_worker, body.messages)
    requests = generate_requests(
        body,
        [prompt],
        manager,
        default_max_tokens=None,
        logprobs=body.logprobs,
        top_logprobs=(body.top_logprobs or 0) if body.logprobs else 0,
        prompt_param="messages",
        constraint=constraint,
    )
    cid, created, model = f"chatcmpl-{new_rid()}", int(time.time()), served_model_name()

    def envelope(choices: list[dict[str, Any]]) -> dict[str, Any]:
        return {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model, "choices": choices}

    if body.stream:

        def choice_chunk(index: int, out: TextOutput) -> dict[str, Any]:
            return {
                "index": index,
                "delta": {"content": out.text} if out.text or out.finish is None else {},
                "logprobs": chat_logprobs(out.logprobs) if body.logprobs else None,
                "finish_reason": out.finish,
                "matched_stop": out.matched_stop,
            }

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
            choice_chunk=choice_chunk,
            envelope=envelope,
            include_usage=include_usage,
        )
        return StreamingResponse(stream, media_type="text/event-stream")

    results = await unless_disconnected(http_request, collect(manager, requests))
    response = envelope(
        [
            {
                "index": i,
                "message": {"role": "assistant", "content": r.text},
                "logprobs": chat_logprobs(r.logprobs) if body.logprobs else None,
                "finish_reason": r.finish,
                "matched_stop": r.matched_stop,
            }
            for i, r in enumerate(results)
        ]
    )
    response["object"] = "chat.completion"
    response["usage"] = usage([len(prompt)], results)
    return response
