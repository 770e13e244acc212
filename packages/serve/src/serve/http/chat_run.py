"""A chat request made ready to run: its prompt rendered (the chat template, or the server's generic
tool format where the template has no tool syntax), its turn planned, its output constraint and
thinking budget found, and its choices admitted as scheduler requests. Chat completions and the
Responses API (which runs as the chat request of its conversation) both start here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from jinja2 import TemplateError

from serve.http.admission import generate_requests
from serve.http.chat_turn import TurnPlan, model_family, one_constraint, turn_plan
from serve.http.errors import bad_request
from serve.http.output_constraints import output_constraint
from serve.http.protocol import ChatCompletionRequest, ChatMessage
from serve.http.thinking_budget import ThinkingBudget, thinking_budget_of
from serve.http.tool_fields import Tool
from serve.ipc.messages import GenerateRequest
from serve.tokenizer.chat_template import NoChatTemplateError
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.worker import TokenizerWorker
from serve.tool_calls.generic_format import generic_conversation


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


@dataclass(frozen=True)
class PreparedChat:
    """A chat request ready to run: how its turns are read, its thinking budget, its prompt ids and
    one scheduler request per choice."""

    plan: TurnPlan
    budget: ThinkingBudget | None
    prompt: Sequence[int]
    requests: list[GenerateRequest]


async def prepared_chat(
    body: ChatCompletionRequest,
    worker: TokenizerWorker,
    manager: TokenizerManager,
    *,
    logprobs: bool,
    top_logprobs: int,
    prompt_param: str,
) -> PreparedChat:
    """`body` planned, constrained, budgeted, rendered and admitted (a 400 naming the field at the
    first step that refuses it); `prompt_param` names the field its prompt came from."""
    plan = await turn_plan(body, worker)
    constraint = one_constraint(plan, await output_constraint(body))
    budget = await thinking_budget_of(body.thinking_tokens(), constraint, worker)
    prompt = await rendered_prompt(worker, body.messages, body.tools or ())
    requests = generate_requests(
        body,
        [prompt],
        manager,
        default_max_tokens=None,
        logprobs=logprobs,
        top_logprobs=top_logprobs,
        prompt_param=prompt_param,
        constraint=constraint,
    )
    return PreparedChat(plan, budget, prompt, requests)
