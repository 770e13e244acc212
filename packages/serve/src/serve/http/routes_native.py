"""The native endpoints: POST /generate, /tokenize and /detokenize."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any

import msgspec
from fastapi import APIRouter, Request
from fastapi.responses import Response, StreamingResponse

from serve.http.admission import check_model, check_token_ids, generate_requests
from serve.http.chat_run import rendered_prompt
from serve.http.errors import bad_request
from serve.http.output_constraints import output_constraint
from serve.http.protocol import DetokenizeBody, GenerateBody, TokenizeBody
from serve.http.sse import DONE, sse
from serve.http.streams import ChoiceResult, collect, fault_error, merged, unless_disconnected
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.request_state import ServerFaultError
from serve.tokenizer.worker import TokenizerWorker

router = APIRouter()


def _meta(result: ChoiceResult, rid: str) -> dict[str, Any]:
    return {
        "id": rid,
        "prompt_tokens": result.prompt_tokens,
        "completion_tokens": result.completion_tokens,
        "cached_tokens": result.cached_tokens,
        "finish_reason": None if result.finish is None else {"type": result.finish, "matched": result.matched_stop},
        "output_token_logprobs": [[e.logprob, e.token_id, e.token] for e in result.logprobs],
        "output_top_logprobs": [[[lp, tid, text] for text, tid, lp in e.top] for e in result.logprobs],
    }


@router.post("/generate")
async def generate(body: GenerateBody, http_request: Request) -> Any:
    """Generate from text or token ids: `{"text", "output_ids", "meta_info"}` per choice
    (a list when n > 1); streamed as SSE events carrying each new piece of text."""
    manager: TokenizerManager = http_request.app.state.manager
    worker: TokenizerWorker = http_request.app.state.tokenizer_worker
    if (body.text is None) == (body.input_ids is None):
        raise bad_request("send exactly one of text or input_ids", param="text")
    prompt: Sequence[int] = (await worker.encode([body.text]))[0] if body.text else (body.input_ids or [])
    fields = body.sampling_params
    constraint = await output_constraint(fields, prefix="sampling_params.")
    requests = generate_requests(
        fields,
        [prompt],
        manager,
        default_max_tokens=128,
        logprobs=body.return_logprob,
        top_logprobs=body.top_logprobs_num,
        prompt_param="text" if body.text is not None else "input_ids",
        constraint=constraint,
    )

    if body.stream:

        async def events() -> AsyncIterator[bytes]:
            results = [ChoiceResult() for _ in requests]
            try:
                async with aclosing(merged(manager, requests)) as outputs:
                    async for index, out in outputs:
                        results[index].add(out)
                        yield sse(
                            {
                                "index": index,
                                "text": out.text,
                                "output_ids": list(out.new_ids),
                                "meta_info": _meta(results[index], out.rid),
                            }
                        )
            except ServerFaultError as err:
                yield sse(fault_error(err).body())
            yield DONE

        return StreamingResponse(events(), media_type="text/event-stream")

    results = await unless_disconnected(http_request, collect(manager, requests))
    answers = [
        {"text": r.text, "output_ids": r.ids, "meta_info": _meta(r, q.rid)}
        for r, q in zip(results, requests, strict=True)
    ]
    return answers[0] if len(answers) == 1 else answers


@router.post("/tokenize")
async def tokenize(body: TokenizeBody, http_request: Request) -> Response:
    """Token ids of a prompt, or of chat messages (with the tools offered) rendered through the chat
    template."""
    manager: TokenizerManager = http_request.app.state.manager
    worker: TokenizerWorker = http_request.app.state.tokenizer_worker
    check_model(body.model)
    if (body.prompt is None) == (body.messages is None):
        raise bad_request("send exactly one of prompt or messages", param="prompt")
    if body.messages is not None:
        tokens = await rendered_prompt(worker, body.messages, body.tools or ())
    else:
        tokens = (await worker.encode([body.prompt or ""], add_special_tokens=body.add_special_tokens))[0]
    # msgspec, not FastAPI's encoder: a prompt near the body limit has millions of ids.
    answer = {"tokens": list(tokens), "count": len(tokens), "max_model_len": manager.model_info.context_length}
    return Response(msgspec.json.encode(answer), media_type="application/json")


@router.post("/detokenize")
async def detokenize(body: DetokenizeBody, http_request: Request) -> Any:
    """The text of token ids."""
    manager: TokenizerManager = http_request.app.state.manager
    check_model(body.model)
    check_token_ids(body.tokens, manager.model_info.vocab_size, "tokens")
    return {"prompt": await http_request.app.state.tokenizer_worker.decode(body.tokens)}
