"""POST /v1/chat/completions."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from jinja2 import TemplateError

from serve.http.admission import generate_requests, new_rid
from serve.http.chat_choice import ChoiceStream, whole_choice
from serve.http.chat_turn import model_family, one_constraint, turn_plan
from serve.http.errors import bad_request
from serve.http.openai_stream import openai_stream
from serve.http.output_constraints import output_constraint
from serve.http.protocol import ChatCompletionRequest, ChatMessage
from serve.http.streams import collect, unless_disconnected
from serve.http.thinking_budget import thinking_budget_of
from serve.http.tool_fields import Tool
from serve.http.usage import usage
from serve.tokenizer.chat_template import NoChatTemplateError
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.served_name import served_model_name
from serve.tokenizer.worker import TokenizerWorker
from serve.tool_calls.generic_format import generic_conversation

router = APIRouter()


async def rendered_prompt(
    worker: TokenizerWorker, messages: Sequence[ChatMessage], tools: Sequence[Tool] = ()
) -> Sequence[int]:
    """The conversation's prompt ids, rendered with the tools offered in the tokenizer worker (by
    the chat template where it has a tool syntax, else in the server's generic format); a missing
    chat template, or one that refuses the conversation (many raise on roles out of order), is the
    client's 400."""
    conversation = [m.template_message() for m in messages]
    offered = [t.template_tool() for t in tools]
    if await model_family(worker) is None:
        conversation, offered = generic_conversation(conversation, offered), []
    try:
        return await worker.chat_prompt(conversation, offered)
    except NoChatTemplateError as err:
        raise bad_request(str(err), param="messages") from None
    except TemplateError as err:
        raise bad_request(f"the model's chat template refused these messages: {err}", param="messages") from None


@router.post("/v1/chat/completions")
async def chat_completions(body: ChatCompletionRequest, http_request: Request) -> Any:
    """OpenAI chat completions, streamed (SSE) or whole; each choice's text read into content,
    reasoning and tool calls as the request's turn plan says (`serve.http.chat_turn`), its
    thinking within the request's budget (`serve.http.thinking_budget`)."""
    manager: TokenizerManager = http_request.app.state.manager
    worker: TokenizerWorker = http_request.app.state.tokenizer_worker
    plan = await turn_plan(body, worker)
    constraint = one_constraint(plan, await output_constraint(body))
    budget = await thinking_budget_of(body.thinking_tokens(), constraint, worker)
    prompt = await rendered_prompt(worker, body.messages, body.tools or ())
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
