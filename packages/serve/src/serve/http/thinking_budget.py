"""A thinking budget: at most so many tokens of reasoning, after which the server closes the think
block itself and the answer follows (`thinking_budget` tokens, or a `reasoning_effort` mapped by
`serve.assistant.reasoning.EFFORT_BUDGETS`).

It runs in two requests, within the serve package (the scheduler has no hook to force tokens in
a running request): the first samples at most the budget; when it ends there inside the think
block, the second continues from the prompt, the tokens written and the end marker's tokens
(`FORCED_CLOSE`), with what is left of the completion's length. When the first ends there with the
block already closed (or never opened), the second continues from the tokens written alone. Both
run the request's sampling (its seed too), and the continuation's prompt is read from the prefix
cache, so a budgeted request is as deterministic as any, and one whose budget is never reached
writes, greedy, the same tokens as without a budget. The client sees one output: the second's
text, ids and counts follow the first's, under the request's id. A stop string that spans the two
is not matched.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing
from dataclasses import dataclass

import msgspec

from config_bags.server import get_serving
from config_bags.server.bags.serving import ReasoningParser
from runtime_scheduler import OutputConstraint
from serve.assistant.reasoning import FORCED_CLOSE, still_thinking
from serve.http.admission import new_rid
from serve.http.errors import bad_request
from serve.ipc.messages import GenerateRequest, TextOutput
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.worker import TokenizerWorker


@dataclass(frozen=True)
class ThinkingBudget:
    """The most tokens a turn may think, the reasoning parser that tells whether it still thinks,
    and the tokens of the end marker that close its block."""

    tokens: int
    parser: ReasoningParser
    close_ids: tuple[int, ...]


async def thinking_budget_of(
    asked: tuple[int, str] | None, constraint: OutputConstraint | None, worker: TokenizerWorker
) -> ThinkingBudget | None:
    """The budget a request `asked` for (tokens, by its field; None: none); a 400 naming the field
    when the server reads no think block (no reasoning parser) or the output is constrained (a
    structured output or a forced call holds it from its first token: there is no block to close)."""
    if asked is None:
        return None
    tokens, param = asked
    parser = get_serving().reasoning_parser
    if parser is None:
        raise bad_request(
            f"{param}: a thinking budget closes the model's think block, and this server reads none (no reasoning "
            "parser); start it with --reasoning-parser qwen3 | deepseek-r1 (or PATCH /v1/runtime_config "
            "reasoning_parser), or send no budget",
            param=param,
        )
    if constraint is not None:
        raise bad_request(
            f"{param}: a constrained output (a structured output or a forced tool call) holds the output from its "
            "first token, so it has no think block to budget; send one of them",
            param=param,
        )
    (close,) = await worker.encode([FORCED_CLOSE], add_special_tokens=False)
    return ThinkingBudget(tokens, parser, tuple(close))


async def budgeted(
    manager: TokenizerManager, request: GenerateRequest, budget: ThinkingBudget
) -> AsyncGenerator[TextOutput, None]:
    """The outputs of `request` thinking within `budget`, as one request's (see the module)."""
    stop = request.request.stop
    first_length = min(budget.tokens, stop.max_new_tokens)
    first = _with(request, request.request.rid, request.request.prompt_ids, first_length)
    text, ids = "", list[int]()
    last: TextOutput | None = None
    async with aclosing(manager.generate(first)) as outputs:
        async for out in outputs:
            text += out.text
            ids.extend(out.new_ids)
            if out.finish is None:
                yield out
            else:
                last = out
    assert last is not None  # a request's outputs end with its finish
    close = budget.close_ids if still_thinking(budget.parser, text) else ()
    room = stop.max_new_tokens - len(ids) - len(close)
    if last.finish != "length" or room <= 0:  # ended (EOS, a stop) or no room left to answer in
        yield last
        return
    yield msgspec.structs.replace(last, finish=None, matched_stop=None)
    written = len(ids) + len(close)
    if close:
        yield TextOutput(
            rid=last.rid,
            text=FORCED_CLOSE,
            new_ids=close,
            prompt_tokens=last.prompt_tokens,
            completion_tokens=written,
            cached_tokens=last.cached_tokens,
        )
    second = _with(request, new_rid(), (*request.request.prompt_ids, *ids, *close), room)
    async with aclosing(manager.generate(second)) as outputs:
        async for out in outputs:
            yield msgspec.structs.replace(
                out,
                rid=last.rid,
                prompt_tokens=last.prompt_tokens,
                completion_tokens=written + out.completion_tokens,
                cached_tokens=last.cached_tokens,
            )


def _with(request: GenerateRequest, rid: str, prompt_ids: tuple[int, ...], length: int) -> GenerateRequest:
    """`request` under id `rid`, from `prompt_ids`, for at most `length` new tokens."""
    stop = msgspec.structs.replace(request.request.stop, max_new_tokens=length)
    inner = msgspec.structs.replace(request.request, rid=rid, prompt_ids=prompt_ids, stop=stop)
    return msgspec.structs.replace(request, request=inner)
