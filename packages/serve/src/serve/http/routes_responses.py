"""POST /v1/responses (OpenAI's Responses API), GET and DELETE /v1/responses/{id}.

A response runs as the chat completion its request translates to (`serve.http.responses_chat`):
the same turn plan, constraints, prompt rendering, admission and sampling, so whatever chat
serves (tool_choice, structured output, reasoning) the Responses API serves alike. Its output is
read into items (`serve.http.responses_output`); a finished response is kept (`store`, default
true) for `previous_response_id` and GET (`serve.http.responses_store`).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from serve.http.chat_run import prepared_chat
from serve.http.errors import APIError
from serve.http.responses_chat import chat_request_of
from serve.http.responses_object import ResponseHead, response_usage, status_of
from serve.http.responses_output import OutputItems
from serve.http.responses_request import ResponsesRequest
from serve.http.responses_store import ResponseStore, StoredResponse
from serve.http.responses_stream import response_stream
from serve.http.streams import ChoiceResult, collect, unless_disconnected
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.worker import TokenizerWorker

router = APIRouter()
# Output items read back as the input items a continuation sends (as a client would send them).


def _store(http_request: Request) -> ResponseStore:
    store: ResponseStore = http_request.app.state.responses
    return store


@router.post("/v1/responses")
async def create_response(body: ResponsesRequest, http_request: Request) -> Any:
    """A response to `body`'s conversation (after the stored one it continues), streamed (SSE
    events) or whole."""
    manager: TokenizerManager = http_request.app.state.manager
    worker: TokenizerWorker = http_request.app.state.tokenizer_worker
    store = _store(http_request)
    history = store.conversation(body.previous_response_id) if body.previous_response_id else ()
    chat, names = chat_request_of(body, history)
    try:
        prepared = await prepared_chat(chat, worker, manager, logprobs=False, top_logprobs=0, prompt_param="input")
        plan, budget, prompt, requests = prepared.plan, prepared.budget, prepared.prompt, prepared.requests
    except APIError as err:
        raise names.renamed(err) from None
    head = ResponseHead.of(body)
    conversation = (*history, *(body.input or ()))

    def finished(output: list[dict[str, Any]], result: ChoiceResult) -> dict[str, Any]:
        response = head.response(status_of(result.finish), output, response_usage(len(prompt), result))
        if body.store:
            store.keep(StoredResponse.of(response, conversation, output))
        return response

    if body.stream:
        stream = response_stream(manager, requests[0], plan.reading, head, finished, budget)
        return StreamingResponse(stream, media_type="text/event-stream")
    (result,) = await unless_disconnected(http_request, collect(manager, requests, budget))
    items, turn = OutputItems(), plan.reading.new_turn()
    items.read([*turn.feed(result.text), *turn.finish()])
    items.finish(status_of(result.finish))
    return finished(items.items, result)


@router.get("/v1/responses/{response_id}")
async def get_response(response_id: str, http_request: Request) -> Any:
    """A stored response, as it was answered."""
    return _store(http_request).get(response_id).response


@router.delete("/v1/responses/{response_id}")
async def delete_response(response_id: str, http_request: Request) -> dict[str, Any]:
    """Forget a stored response (a continuation of it is then a 404)."""
    _store(http_request).delete(response_id)
    return {"id": response_id, "object": "response", "deleted": True}
