"""The request fields this server does not act on, and what it accepts of each: the one table
every request model of the API reads (`serve.http.request_object.RequestObject`).

What the server accepts, it does. A request field it would not act on is refused with a 400 that
names the field (its dotted path is the error's `param`) and says it is not supported here; the
decisions, per field, as a user of OpenAI, vLLM or SGLang would expect them:

- A field that changes the output when set is refused when set to anything but a value that
  changes nothing, and accepted (then dropped) at that value, because SDKs and clients send such
  values routinely: `null`, `[]`, `{}`, `false` or the field's default. So `best_of` only as
  null or equal to n, `echo` false, `suffix` "", the legacy `functions` [] and `function_call`
  "none" (chat completions take `tools` and `tool_choice`, `serve.http.tool_fields`; a
  completion's `tools` only [] and `tool_choice` "none"), `modalities` ["text"], `audio`,
  `prediction`, `web_search_options` and `verbosity` null (a completion's `reasoning_effort` too:
  chat completions and responses serve it as a thinking budget, `serve.http.thinking_budget`), `service_tier`
  "auto" or "default" (there is one tier: every request is served at it), `store` false (this
  server keeps no completion); the vLLM and SGLang sampling extensions (beam search, minimum
  lengths, prompt logprobs, token restrictions, a per-request grammar engine or whitespace
  pattern) and chat-rendering extensions (`add_generation_prompt` true, custom templates) at
  their defaults. A completion's `parallel_tool_calls` is accepted as any boolean: it bounds tool
  calls, and a completion makes none. Structured output (`response_format`, `json_schema`,
  `regex`, `ebnf`, `structured_outputs`, `guided_*`) and `logit_bias` are served fields
  (`serve.http.output_constraints`, `serve.http.admission`).
- Pure metadata is accepted with any value: `user` and `safety_identifier` (an end-user id for
  the caller's abuse monitoring) and `metadata` (the caller's labels); neither changes anything
  in the output, and this server keeps no per-user or per-request state for them to change. So
  is a past tool call's `index` (its position, which the list's order gives).
- Any other name is refused, naming the close matches among the fields accepted there (difflib),
  so a misspelt `temprature` is never silently sampled at the default. The official `openai`
  client sends only what its caller set, so it is not affected.
- Chat messages are given to the chat template as role and content, an assistant's
  `tool_calls` and `reasoning_content` and a tool result's `tool_call_id`, so a message field the
  template would never see (`name`, `refusal`, `audio`, the legacy `function_call`, the `parsed`
  copy the openai client's helpers send back) is refused unless null or empty. Content parts
  other than text are refused by `serve.http.protocol.ChatMessage` (a text-only model). A
  `developer` message (OpenAI's newer name for a system message) is rendered as `system`, the
  role the served models' templates know.
- The Responses API (`serve.http.responses_request`) runs as a chat completion, so its fields
  follow chat's: `background` false, `include` [], `truncation` "disabled", `top_logprobs` 0,
  `reasoning.summary` and `text.verbosity` ("medium") at their defaults; `prompt_cache_key`, `user`,
  `safety_identifier` and `metadata` are metadata, and so are an input item's `id` and `status`
  (what the server returned, sent back). A past answer's `annotations` only empty, a reasoning
  item's `summary` only empty and never `encrypted_content` (the template renders neither).
- Declared fields that would be ignored in combination are refused there, in the models of
  `serve.http.protocol`: `stream_options.include_usage` without `stream`, `top_logprobs` without
  `logprobs`, and `add_special_tokens: true` with /tokenize's messages. /generate's
  sampling_params carry no `stream` (its body's `stream` streams).

Every decision is pinned, and its guard reverse-verified, in
packages/serve/tests/test_http_unserved_fields.py and the end-to-end battery of
tests/test_e2e_bad_input_http.py.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from serve.http.errors import refused_field, shown


@dataclass(frozen=True)
class Refused:
    """A field this server does not act on: refused unless its value is one that changes nothing."""

    would: str  # what the field asks for, which this server does not do
    no_op: tuple[Any, ...] = (None,)
    # Also a no-op when equal to another field's value: (that field, its default).
    or_equal_to: tuple[str, Any] | None = None

    def is_no_op(self, value: Any, data: Mapping[str, Any]) -> bool:
        """Whether `value` changes nothing, given the rest of the object `data`."""
        if any(_same_json(value, v) for v in self.no_op):
            return True
        if self.or_equal_to is None:
            return False
        other, default = self.or_equal_to
        return _same_json(value, data.get(other, default))

    def accepted(self, data: Mapping[str, Any]) -> str:
        """The no-op values in words (JSON spelling)."""
        values = [json.dumps(v) for v in self.no_op]
        if self.or_equal_to is not None:
            other, default = self.or_equal_to
            values.append(f"equal to {other} ({json.dumps(data.get(other, default))})")
        return " or ".join(values)


@dataclass(frozen=True)
class Metadata:
    """A field accepted with any value: it labels the request and changes nothing in the output."""

    why: str


Decision = Refused | Metadata


def _same_json(a: Any, b: Any) -> bool:
    # JSON's false is not 0 (Python's `False == 0`): a boolean matches only a boolean.
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return bool(a == b)


def _table(*parts: Mapping[str, Decision], **entries: Decision) -> Mapping[str, Decision]:
    merged: dict[str, Decision] = {}
    for part in parts:
        merged.update(part)
    merged.update(entries)
    return MappingProxyType(merged)


_TEXT_ONLY = "hand the model images, audio or video; this server serves a text-only model"

SAMPLING_FIELDS = _table(
    best_of=Refused("sample several completions and return the best", or_equal_to=("n", 1)),
    use_beam_search=Refused("decode by beam search", (None, False)),
    length_penalty=Refused("weigh beam-search lengths", (None, 1.0)),
    min_tokens=Refused("hold off EOS and stops for a minimum length", (None, 0)),
    min_new_tokens=Refused("hold off EOS and stops for a minimum length", (None, 0)),
    include_stop_str_in_output=Refused("keep the matched stop string in the text", (None, False)),
    no_stop_trim=Refused("keep the matched stop string in the text", (None, False)),
    prompt_logprobs=Refused("return the prompt tokens' logprobs"),
    allowed_token_ids=Refused("sample only from given tokens"),
    bad_words=Refused("ban word sequences", (None, [])),
    logits_processors=Refused("run custom logits processors", (None, [])),
    truncate_prompt_tokens=Refused("cut the prompt to its last tokens"),
    priority=Refused("order requests by priority", (None, 0)),
    return_tokens_as_token_ids=Refused("spell logprob tokens as token ids", (None, False)),
    guided_decoding_backend=Refused(
        "choose the grammar engine per request (it is the grammar_backend setting)", (None, "auto", "xgrammar")
    ),
    guided_whitespace_pattern=Refused("constrain the whitespace between JSON items"),
)

_OPENAI_FIELDS = _table(
    SAMPLING_FIELDS,
    echo=Refused("repeat the prompt (or the last message) before the completion", (None, False)),
    functions=Refused("take the legacy functions (send them as tools)", (None, [])),
    function_call=Refused("take the legacy function_call (send tool_choice)", (None, "none")),
    audio=Refused("answer with audio"),
    modalities=Refused("answer in modalities other than text", (None, ["text"])),
    prediction=Refused("speed decoding up with a predicted output"),
    web_search_options=Refused("search the web"),
    verbosity=Refused("set the answer's verbosity"),
    store=Refused("store the completion for later retrieval", (None, False)),
    service_tier=Refused("serve at a chosen processing tier", (None, "auto", "default")),
    user=Metadata("an end-user id for the caller's monitoring"),
    safety_identifier=Metadata("an end-user id for the caller's monitoring"),
    metadata=Metadata("the caller's labels"),
)

COMPLETION_FIELDS = _table(
    _OPENAI_FIELDS,
    reasoning_effort=Refused("bound the model's reasoning (chat completions do)"),
    tools=Refused("let the model call tools in a completion (chat completions do)", (None, [])),
    tool_choice=Refused("choose tool calls in a completion (chat completions do)", (None, "none")),
    parallel_tool_calls=Refused("allow several tool calls in one turn", (None, True, False)),
    suffix=Refused("complete the text before a suffix (insertion)", (None, "")),
    add_special_tokens=Refused("tokenize a text prompt without the tokenizer's special tokens", (None, True)),
)

# How a conversation is rendered: the server's chat template, with the generation prompt.
_RENDERING_FIELDS = _table(
    add_generation_prompt=Refused("render the conversation without the assistant's generation prompt", (None, True)),
    continue_final_message=Refused("continue the final assistant message instead of starting one", (None, False)),
    chat_template=Refused("render through a template sent with the request"),
    chat_template_kwargs=Refused("pass variables to the chat template", (None, {})),
    documents=Refused("hand documents to the chat template", (None, [])),
)

CHAT_FIELDS = _table(
    _OPENAI_FIELDS,
    _RENDERING_FIELDS,
    add_special_tokens=Refused("add the tokenizer's special tokens around the rendered template", (None, False)),
)

_ROLE_AND_CONTENT = "(a chat template is given a message's role, content, tool calls and reasoning only)"
MESSAGE_FIELDS = _table(
    name=Refused(f"give the chat template a participant's name {_ROLE_AND_CONTENT}", (None, "")),
    function_call=Refused("render the legacy function_call (send tool_calls)"),
    parsed=Refused(
        "read a client's own parse of the content (the openai client sends it back, null beside plain text)"
    ),
    refusal=Refused(f"render a refusal {_ROLE_AND_CONTENT}"),
    audio=Refused("render audio answers"),
    annotations=Refused(f"render an answer's annotations {_ROLE_AND_CONTENT}", (None, [])),
)

# An assistant message's past call, as the openai client's stream helpers send it back.
TOOL_CALL_FIELDS = _table(index=Metadata("the call's position in its turn, which the list's order gives"))

STREAM_OPTION_FIELDS = _table(
    continuous_usage_stats=Refused("report usage in every chunk", (None, False)),
    include_obfuscation=Refused("pad stream chunks with obfuscation", (None, False)),
)

GENERATE_FIELDS = _table(
    image_data=Refused(_TEXT_ONLY, (None, [])),
    audio_data=Refused(_TEXT_ONLY, (None, [])),
    video_data=Refused(_TEXT_ONLY, (None, [])),
    input_embeds=Refused("feed embeddings instead of tokens"),
    lora_path=Refused("serve through a LoRA adapter"),
    return_hidden_states=Refused("return hidden states", (None, False)),
    logprob_start_len=Refused("return logprobs of the prompt from a position", (None, -1)),
    return_text_in_logprobs=Refused("leave the token text out of the logprobs", (None, True)),
    custom_logit_processor=Refused("run a custom logits processor"),
)

TOKENIZE_FIELDS = _table(
    _RENDERING_FIELDS,
    return_token_strs=Refused("return each token's text", (None, False)),
)

JSON_SCHEMA_FORMAT_FIELDS: Mapping[str, Decision] = MappingProxyType({})

STRUCTURED_OUTPUTS_FIELDS = _table(
    disable_fallback=Refused("fall back to another grammar engine", (None, True, False)),
    # JSON here allows the whitespace a model writes, a bounded run of it (serve.grammar.xgrammar_engine).
    disable_any_whitespace=Refused("keep JSON free of whitespace between its items", (None, False)),
    disable_additional_properties=Refused(
        "allow JSON properties a schema does not name when it says nothing of them", (None, True)
    ),
    whitespace_pattern=Refused("constrain the whitespace between JSON items"),
    structural_tag=Refused("constrain the output by structural tags"),
)

# POST /v1/responses (`serve.http.responses_request`): its sampling runs as a chat completion's.
RESPONSES_FIELDS = _table(
    background=Refused("run the response in the background", (None, False)),
    conversation=Refused("keep the response in a conversation object (send previous_response_id)"),
    include=Refused("add extra outputs (logprobs, encrypted reasoning, search results)", (None, [])),
    max_tool_calls=Refused("bound the number of built-in tool calls"),
    prompt=Refused("render a stored prompt template"),
    prompt_cache_key=Metadata("a hint for routing to a prompt cache; this server's prefix cache needs none"),
    prompt_cache_retention=Refused("keep a prompt cache for a chosen time", (None, "in_memory")),
    service_tier=Refused("serve at a chosen processing tier", (None, "auto", "default")),
    stream_options=Refused("pad stream events with obfuscation", (None, {}, {"include_obfuscation": False})),
    top_logprobs=Refused("return the output's logprobs", (None, 0)),
    truncation=Refused("drop the conversation's start when it outgrows the context", (None, "disabled")),
    user=Metadata("an end-user id for the caller's monitoring"),
    safety_identifier=Metadata("an end-user id for the caller's monitoring"),
    metadata=Metadata("the caller's labels"),
)

RESPONSES_TEXT_FIELDS = _table(verbosity=Refused("set the answer's verbosity", (None, "medium")))

RESPONSES_REASONING_FIELDS = _table(
    summary=Refused("summarize the model's reasoning"),
    generate_summary=Refused("summarize the model's reasoning"),
)

# An item of a Responses input: what the server itself returned is sent back with its id and
# status, which name and label the item and change nothing in the prompt.
_ITEM_LABELS = _table(
    id=Metadata("the item's id"),
    status=Metadata("the item's status when it was returned"),
)

RESPONSES_MESSAGE_FIELDS = _table(_ITEM_LABELS, phase=Refused("label the message a commentary or a final answer"))
RESPONSES_CALL_FIELDS = _table(_ITEM_LABELS, namespace=Refused("call a function of a namespace"))
RESPONSES_OUTPUT_FIELDS = _ITEM_LABELS
RESPONSES_REASONING_ITEM_FIELDS = _table(
    _ITEM_LABELS,
    summary=Refused(f"render a reasoning summary {_ROLE_AND_CONTENT}", (None, [])),
    encrypted_content=Refused("read encrypted reasoning"),
)
RESPONSES_TEXT_PART_FIELDS = _table(
    annotations=Refused(f"render an answer's annotations {_ROLE_AND_CONTENT}", (None, [])),
    logprobs=Metadata("the logprobs the text was returned with; the template renders the text"),
)

NO_FIELDS: Mapping[str, Decision] = MappingProxyType({})


def served_fields(
    data: Mapping[str, Any], declared: Collection[str], table: Mapping[str, Decision], prefix: str = ""
) -> dict[str, Any]:
    """`data` without the fields the model does not declare but `table` accepts (a no-op value,
    or metadata); any other undeclared field is refused with `refused_field`, its path being
    `prefix` + its name."""
    served: dict[str, Any] = {}
    for name, value in data.items():
        if name in declared:
            served[name] = value
            continue
        decision = table.get(name)
        if isinstance(decision, Metadata):
            continue
        if decision is None:
            accepted = [*declared, *(n for n, d in table.items() if isinstance(d, Metadata))]
            close = difflib.get_close_matches(name, accepted, n=3)
            hint = (
                f"did you mean {', '.join(close)}?" if close else f"the fields accepted here are {', '.join(accepted)}"
            )
            raise refused_field(prefix + name, f"unknown field, not supported here; {hint}")
        if not decision.is_no_op(value, data):
            raise refused_field(
                prefix + name,
                f"not supported here: this server does not {decision.would}; accepted only as "
                f"{decision.accepted(data)}, got {shown(value)}",
            )
    return served


EMBEDDING_FIELDS = _table(
    user=Metadata("an end-user id for the caller's monitoring"),
)

RERANK_FIELDS = _table(
    user=Metadata("an end-user id for the caller's monitoring"),
)

SCORE_FIELDS = _table(
    user=Metadata("an end-user id for the caller's monitoring"),
)
