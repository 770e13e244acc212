"""Turning an API request into scheduler requests, refusing what the server cannot serve with a
400 that names the limit: unknown model, empty prompt, n above serving.max_n, too many tokens."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from config_bags import get_serving
from runtime_scheduler.request import Request, SamplingParams, StopConditions

from serve.http.errors import bad_request
from serve.http.protocol import SamplingFields
from serve.ipc.messages import GenerateRequest
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.served_name import served_model_name


def check_model(name: str | None) -> None:
    """Refuse a model name other than the one served (no name means the served one)."""
    served = served_model_name()
    if name is not None and name != served:
        raise bad_request(f"model {name!r} is not served here; this server serves {served!r}", param="model", code="model_not_found")


def check_n(n: int) -> None:
    """Refuse more choices than serving.max_n."""
    limit = get_serving().max_n
    if n > limit:
        raise bad_request(f"n={n} is above this server's limit of {limit} (serving.max_n); accepted: 1 to {limit}", param="n")


def new_rid() -> str:
    """A fresh request id."""
    return uuid.uuid4().hex


def completion_budget(prompt_len: int, max_tokens: int | None, default: int | None, manager: TokenizerManager) -> int:
    """The max_new_tokens of a prompt: `max_tokens`, else `default` capped by the room left, else
    all the room left; refused when the prompt alone or the prompt plus `max_tokens` does not fit
    the context length (or the KV pool, when that is smaller)."""
    info = manager.model_info
    limit = min(info.context_length, info.max_total_tokens)
    limit_name = "maximum context length" if limit == info.context_length else "KV-cache capacity"
    room = limit - prompt_len
    if room <= 0:
        raise bad_request(
            f"the prompt has {prompt_len} tokens, but this model's {limit_name} is {limit} tokens "
            "(prompt plus completion); shorten the prompt",
            param="prompt",
            code="context_length_exceeded",
        )
    if max_tokens is None:
        return room if default is None else min(default, room)
    if max_tokens > room:
        raise bad_request(
            f"this model's {limit_name} is {limit} tokens, but {prompt_len + max_tokens} were requested "
            f"({prompt_len} in the prompt, {max_tokens} for the completion); lower max_tokens to at most {room}",
            param="max_tokens",
            code="context_length_exceeded",
        )
    return max_tokens


def generate_requests(
    fields: SamplingFields,
    prompts: Sequence[Sequence[int]],
    manager: TokenizerManager,
    *,
    max_tokens: int | None,
    default_max_tokens: int | None,
    logprobs: bool,
    top_logprobs: int,
) -> list[GenerateRequest]:
    """One scheduler request per (prompt, choice), prompt-major, after every admission check."""
    check_model(fields.model)
    check_n(fields.n)
    for prompt in prompts:
        if not prompt:
            raise bad_request("the prompt is empty; send at least one token of prompt", param="prompt")
        if any(t >= manager.model_info.vocab_size for t in prompt):
            raise bad_request(f"prompt token ids must be below the vocabulary size {manager.model_info.vocab_size}", param="prompt")
    eos = frozenset(manager.eos_token_ids)
    requests: list[GenerateRequest] = []
    for prompt in prompts:
        budget = completion_budget(len(prompt), max_tokens, default_max_tokens, manager)
        for choice in range(fields.n):
            try:
                request = Request(
                    rid=new_rid(),
                    prompt_ids=tuple(prompt),
                    sampling=SamplingParams(
                        temperature=fields.temperature,
                        top_p=fields.top_p,
                        top_k=fields.top_k,
                        min_p=fields.min_p,
                        repetition_penalty=fields.repetition_penalty,
                        frequency_penalty=fields.frequency_penalty,
                        presence_penalty=fields.presence_penalty,
                        seed=None if fields.seed is None else fields.seed + choice,
                        logprobs=logprobs,
                        top_logprobs=top_logprobs,
                    ),
                    stop=StopConditions(
                        max_new_tokens=budget,
                        stop_token_ids=frozenset(fields.stop_token_ids or ()),
                        eos_token_ids=eos,
                        ignore_eos=fields.ignore_eos,
                    ),
                )
            except ValueError as err:
                raise bad_request(str(err)) from None
            requests.append(
                GenerateRequest(request=request, stop_strings=fields.stop_strings(), skip_special_tokens=fields.skip_special_tokens)
            )
    return requests
