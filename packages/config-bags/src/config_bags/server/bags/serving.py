"""serving: the HTTP front door."""

from __future__ import annotations

from typing import Annotated, Literal

from config_bags.bag import Bag
from config_bags.constraints import NonEmptyStr, Port, PositiveInt
from config_bags.leaf import leaf

GrammarBackend = Literal["xgrammar", "none"]
ToolCallParser = Literal["hermes", "qwen25", "llama3"]
ReasoningParser = Literal["qwen3", "deepseek-r1"]


class ServingBag(Bag, frozen=True, kw_only=True):
    """Listening address, authentication and per-request limits of the API."""

    host: Annotated[NonEmptyStr, leaf("Address the HTTP server binds.", hot=False)] = "127.0.0.1"
    port: Annotated[Port, leaf("Port the HTTP server binds.", hot=False)] = 30000
    api_key: Annotated[
        NonEmptyStr | None, leaf("Bearer token every endpoint but /health requires (unset: open).", hot=False)
    ] = None
    web_ui: Annotated[
        bool,
        leaf("Serve the chat page at / and the dashboard at /dashboard (--no-web-ui: the HTTP API only).", hot=False),
    ] = True
    max_n: Annotated[PositiveInt, leaf("Most choices (n) one completion request may ask for.", hot=True)] = 16
    stream_interval: Annotated[PositiveInt, leaf("Decode steps between streamed chunks.", hot=True)] = 1
    max_request_body_mb: Annotated[
        PositiveInt,
        leaf("Largest request body the API reads, in MiB; a larger one is answered 413 before it is read.", hot=True),
    ] = 4
    max_stored_responses: Annotated[
        PositiveInt,
        leaf(
            "Most finished /v1/responses kept in memory for previous_response_id and GET (least recently used "
            "dropped first).",
            hot=True,
        ),
    ] = 1024
    grammar_backend: Annotated[
        GrammarBackend,
        leaf(
            "Grammar engine of structured outputs and forced tool calls (json_schema, regex, ebnf, choice); "
            "none refuses every constrained request.",
            hot=False,
        ),
    ] = "xgrammar"
    tool_call_parser: Annotated[
        ToolCallParser | None,
        leaf(
            "How tool calls are read out of the model's text: hermes or qwen25 (<tool_call>{json}</tool_call>), "
            "llama3 (a JSON object); unset: inferred from the chat template where it is unambiguous.",
            hot=True,
        ),
    ] = None
    reasoning_parser: Annotated[
        ReasoningParser | None,
        leaf(
            "Split the model's <think>...</think> reasoning into reasoning_content: qwen3 (the model opens the block), "
            "deepseek-r1 (the prompt opens it); unset: the reasoning stays in content.",
            hot=True,
        ),
    ] = None
