"""Turning an API request into scheduler requests, refusing what the server cannot serve with a
400 that names the field and the limit: unknown model, empty prompt, n above serving.max_n, too
many tokens, top_k, token ids or logit_bias keys outside the vocabulary, a per-choice seed
outside 64 bits."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from config_bags.server import get_serving
from runtime_scheduler.request import OutputConstraint, Request, SamplingParams, StopConditions
from serve.http.errors import bad_request
from serve.http.protocol import INT64_MAX, INT64_MIN, SamplingFields
from serve.ipc.messages import GenerateRequest
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.served_name import served_model_name


def check_model(name: str | None) -> None:
    """Refuse a model name other than the one served (no name means the served one)."""
    served = served_model_name()
    if name is not None and name != served:
        raise bad_request(
            f"model {name!r} is not served here; this server serves {served!r}", param="model", code="model_not_found"
        )


def check_n(n: int) -> None:
    """Refuse more choices than serving.max_n."""
    limit = get_serving().max_n
    if n > limit:
        raise bad_request(
            f"n={n} is above this server's limit of {limit} (serving.max_n); accepted: 1 to {limit}", param="n"
        )


def new_rid() -> str:
    """A fresh request id."""
    return uuid.uuid4().hex


def check_sampling(fields: SamplingFields, vocab_size: int) -> None:
    """Refuse sampling fields the runtime cannot hold: top_k beyond the vocabulary, stop token ids
    outside it, and a seed whose per-choice seeds (`seed + choice`) leave a signed 64-bit int."""
    if fields.top_k != -1 and not 1 <= fields.top_k <= vocab_size:
        raise bad_request(
            f"top_k={fields.top_k} is not accepted; accepted: -1 (no limit) or 1 to {vocab_size} (the vocabulary size)",
            param="top_k",
        )
    if fields.stop_token_ids:
        check_token_ids(fields.stop_token_ids, vocab_size, "stop_token_ids")
    if fields.seed is not None and fields.seed + fields.n - 1 > INT64_MAX:
        raise bad_request(
            f"seed={fields.seed} with n={fields.n} gives choice {fields.n - 1} the seed {fields.seed + fields.n - 1}, "
            f"above the largest signed 64-bit integer; accepted: {INT64_MIN} to {INT64_MAX - fields.n + 1}",
            param="seed",
        )


def logit_bias_of(fields: SamplingFields, vocab_size: int) -> tuple[tuple[int, float], ...]:
    """The request's logit bias as sorted (token id, bias) pairs; a key that is not a token id of
    the vocabulary is refused (the bias range is the protocol's)."""
    pairs: dict[int, float] = {}
    for key, bias in (fields.logit_bias or {}).items():
        token = key.strip()
        if not token.isdigit() or int(token) >= vocab_size:
            raise bad_request(
                f"logit_bias: key {key!r} is not a token id; keys are token ids 0 to {vocab_size - 1} (as strings)",
                param="logit_bias",
            )
        if int(token) in pairs:
            raise bad_request(f"logit_bias: token id {int(token)} is given twice", param="logit_bias")
        pairs[int(token)] = bias
    return tuple(sorted(pairs.items()))


def check_token_ids(ids: Sequence[int], vocab_size: int, param: str) -> None:
    """Refuse token ids at or above the vocabulary size (ids are never negative: the protocol
    and the tokenizer both give ids >= 0)."""
    largest = max(ids, default=0)
    if largest >= vocab_size:
        raise bad_request(
            f"{param}: token id {largest} is not in the vocabulary; accepted: 0 to {vocab_size - 1}", param=param
        )


def requested_length(fields: SamplingFields) -> tuple[str, int] | None:
    """(field name, value) of the completion length the client asked for, None when it did not;
    two spellings with different values are refused."""
    given = fields.length_fields()
    if len(set(given.values())) > 1:
        both = ", ".join(f"{name}={value}" for name, value in given.items())
        raise bad_request(
            f"conflicting completion lengths: {both}; send one of {' or '.join(given)}", param=next(iter(given))
        )
    return next(iter(given.items()), None)


def completion_budget(
    prompt_len: int,
    requested: tuple[str, int] | None,
    default: int | None,
    manager: TokenizerManager,
    prompt_param: str,
) -> int:
    """The max_new_tokens of a prompt: the `requested` (field, length), else `default` capped by
    the room left, else all the room left; refused when the prompt alone or the prompt plus the
    requested length does not fit the context length (or the KV pool, when that is smaller)."""
    info = manager.model_info
    limit = min(info.context_length, info.max_total_tokens)
    limit_name = "maximum context length" if limit == info.context_length else "KV-cache capacity"
    room = limit - prompt_len
    if room <= 0:
        raise bad_request(
            f"the prompt has {prompt_len} tokens, but this model's {limit_name} is {limit} tokens "
            "(prompt plus completion); shorten the prompt",
            param=prompt_param,
            code="context_length_exceeded",
        )
    if requested is None:
        return room if default is None else min(default, room)
    name, length = requested
    if length > room:
        raise bad_request(
            f"this model's {limit_name} is {limit} tokens, but {prompt_len + length} were requested "
            f"({prompt_len} in the prompt, {length} for the completion); lower {name} to at most {room}",
            param=name,
            code="context_length_exceeded",
        )
    return length


def generate_requests(
    fields: SamplingFields,
    prompts: Sequence[Sequence[int]],
    manager: TokenizerManager,
    *,
    default_max_tokens: int | None,
    logprobs: bool,
    top_logprobs: int,
    prompt_param: str = "prompt",
    constraint: OutputConstraint | None = None,
) -> list[GenerateRequest]:
    """One scheduler request per (prompt, choice), prompt-major, after every admission check.
    `prompt_param` is the request field the prompts came from, named by a refusal; `constraint`
    (checked by the caller) is what each choice's output must match."""
    check_model(fields.model)
    check_n(fields.n)
    vocab_size = manager.model_info.vocab_size
    check_sampling(fields, vocab_size)
    logit_bias = logit_bias_of(fields, vocab_size)
    requested = requested_length(fields)
    budgets: list[int] = []
    for prompt in prompts:
        if not prompt:
            raise bad_request("the prompt is empty; send at least one token of prompt", param=prompt_param)
        # The length first: a prompt far over the context is refused without a pass over its ids.
        budgets.append(completion_budget(len(prompt), requested, default_max_tokens, manager, prompt_param))
        check_token_ids(prompt, vocab_size, prompt_param)
    eos = frozenset(manager.eos_token_ids)
    requests: list[GenerateRequest] = []
    for prompt, budget in zip(prompts, budgets, strict=True):
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
                        logit_bias=logit_bias,
                        constraint=constraint,
                    ),
                    stop=StopConditions(
                        max_new_tokens=budget,
                        stop_token_ids=frozenset(fields.stop_token_ids or ()),
                        eos_token_ids=eos,
                        ignore_eos=fields.ignore_eos,
                    ),
                )
            except ValueError as err:  # the scheduler's own checks; the ones above run first
                raise bad_request(str(err)) from None
            requests.append(
                GenerateRequest(
                    request=request, stop_strings=fields.stop_strings(), skip_special_tokens=fields.skip_special_tokens
                )
            )
    return requests
