"""Running a handler's scheduler requests: all outputs merged in arrival order, or each request's
output collected whole; both abort every request still running when the client goes away."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TypeVar

from starlette.requests import Request as HttpRequest

from serve.http.errors import APIError
from serve.http.thinking_budget import ThinkingBudget, budgeted
from serve.ipc.messages import GenerateRequest, LogprobEntry, TextOutput
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.request_state import RequestFailedError, ServerFaultError

T = TypeVar("T")
_DISCONNECT_POLL_S = 0.25


@dataclass
class ChoiceResult:
    """One request's whole output, accumulated."""

    text: str = ""
    ids: list[int] = field(default_factory=list)
    finish: str | None = None
    matched_stop: int | str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    logprobs: list[LogprobEntry] = field(default_factory=list)

    def add(self, out: TextOutput) -> None:
        """Fold one output in."""
        self.text += out.text
        self.ids.extend(out.new_ids)
        self.logprobs.extend(out.logprobs)
        self.finish = out.finish
        self.matched_stop = out.matched_stop
        self.prompt_tokens = out.prompt_tokens
        self.completion_tokens = out.completion_tokens
        self.cached_tokens = out.cached_tokens


def fault_error(err: ServerFaultError) -> APIError:
    """The error answered when the server cannot finish a request: a 500 naming the cause when
    serving that request failed (the server goes on), a 503 when a server process died under it
    or the scheduler refused it."""
    if isinstance(err, RequestFailedError):
        return APIError(500, str(err), type_="server_error", code="request_failed")
    return APIError(
        503, f"the server cannot complete the request: {err}", type_="server_error", code="server_unavailable"
    )


async def merged(
    manager: TokenizerManager, requests: Sequence[GenerateRequest], budget: ThinkingBudget | None = None
) -> AsyncGenerator[tuple[int, TextOutput], None]:
    """(request index, output) of all `requests` as outputs arrive, until every one finished; each
    thinks within `budget` when one is given."""
    queue: asyncio.Queue[tuple[int, TextOutput] | BaseException] = asyncio.Queue()

    async def pump(index: int, request: GenerateRequest) -> None:
        generated = manager.generate(request) if budget is None else budgeted(manager, request, budget)
        try:
            async with aclosing(generated) as outputs:
                async for out in outputs:
                    queue.put_nowait((index, out))
        except Exception as err:
            queue.put_nowait(err)

    tasks = [asyncio.create_task(pump(i, r)) for i, r in enumerate(requests)]
    try:
        remaining = len(requests)
        while remaining:
            item = await queue.get()
            if isinstance(item, BaseException):
                raise item
            if item[1].finish is not None:
                remaining -= 1
            yield item
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def collect(
    manager: TokenizerManager, requests: Sequence[GenerateRequest], budget: ThinkingBudget | None = None
) -> list[ChoiceResult]:
    """Each request's whole output, in request order (each thinking within `budget`, if given)."""
    results = [ChoiceResult() for _ in requests]
    async with aclosing(merged(manager, requests, budget)) as outputs:
        async for index, out in outputs:
            results[index].add(out)
    return results


async def unless_disconnected(http_request: HttpRequest, work: Awaitable[T]) -> T:
    """Await `work`, cancelling it (which aborts its requests) if the client disconnects first."""
    task = asyncio.ensure_future(work)

    async def watch() -> None:
        while not await http_request.is_disconnected():
            await asyncio.sleep(_DISCONNECT_POLL_S)

    watcher = asyncio.create_task(watch())
    try:
        await asyncio.wait({task, watcher}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
    if not task.done():
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise APIError(499, "client disconnected", type_="invalid_request_error", code="client_disconnected")
    try:
        return task.result()
    except ServerFaultError as err:
        raise fault_error(err) from None
