"""How a chat request's assistant turns are read, and what constrains their output: decided as the
request arrives, from its tools and tool_choice and the serving leaves read at that moment
(reasoning_parser, tool_call_parser, grammar_backend).

- No tools, or tool_choice "none": the turn is content (and reasoning, with a reasoning parser);
  the template is still given the tools, as OpenAI's models still see them.
- "auto": the model may write calls, read in the family `serving.tool_call_parser` names, else the
  one the chat template writes (`serve.tool_calls.families`), else in the server's own format
  (`serve.tool_calls.generic_format`, which writes the `<tool_call>` syntax into the prompt). In
  either family's syntax the grammar engine holds every call to its function's schema from its
  first token (`serve.tool_calls.families.calls_constraint`; at most one call with
  parallel_tool_calls false), so `strict: true` is kept; where it cannot (the grammar backend is
  off) a strict function is a 400, and so is a strict function whose schema uses a keyword the
  engine would not enforce. A structured
  output sent beside "auto" constrains the output instead of the calls' grammar.
- "required" or a named function: the grammar engine forces the call (`serve.tool_calls.forced`);
  refused with a 400 when the grammar backend is off, when a forced function's schema uses a
  keyword the engine would not enforce (`serve.grammar.constraint_check`), and beside a structured
  output (`serve.http.output_constraints`): the one output cannot be both the call and the format.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from config_bags.server import get_serving
from config_bags.server.bags.serving import ToolCallParser
from runtime_scheduler import OutputConstraint
from serve.assistant_turn import FamilyCalls, NamedCall, RequiredCalls, TurnReading
from serve.grammar.constraint_check import constraint_refusal
from serve.grammar.schema_support import unenforced_feature_of
from serve.http.errors import bad_request
from serve.http.protocol import ChatCompletionRequest
from serve.http.tool_fields import NamedToolChoice, Tool
from serve.tokenizer.worker import TokenizerWorker
from serve.tool_calls.families import calls_constraint, family_of_template
from serve.tool_calls.forced import named_constraint, required_constraint


@dataclass(frozen=True)
class TurnPlan:
    """How every choice's turn is read, and what its output must match (None: free text);
    `forced` when that is a forced call, which no structured output can join."""

    reading: TurnReading
    constraint: OutputConstraint | None = None
    forced: bool = False


async def model_family(worker: TokenizerWorker) -> ToolCallParser | None:
    """The model's own call syntax: the one `serving.tool_call_parser` names, else the one its
    chat template writes; None when it has none (the server's generic format stands in)."""
    return get_serving().tool_call_parser or family_of_template(await worker.chat_template())


async def turn_plan(body: ChatCompletionRequest, worker: TokenizerWorker) -> TurnPlan:
    """The plan of `body`'s turns; a 400 when its tool_choice cannot be served here."""
    serving = get_serving()
    tools = body.tools or []
    choice = body.chosen_tools()
    one = not body.parallel_tool_calls
    if not tools or choice == "none":
        return TurnPlan(TurnReading(reasoning=serving.reasoning_parser))
    names = tuple(tool.function.name for tool in tools)
    if choice == "auto":
        family = await model_family(worker) or "hermes"  # the generic format writes hermes's syntax
        reading = TurnReading(serving.reasoning_parser, FamilyCalls(family, names), one)
        return TurnPlan(reading, await _auto_calls_constraint(tools, family, one))
    shown = choice.function.name if isinstance(choice, NamedToolChoice) else choice
    if serving.grammar_backend == "none":
        raise bad_request(
            f"tool_choice: {shown!r} forces the call through the grammar engine, which is off on this server "
            "(--grammar-backend none); send tool_choice 'auto', or start the server with --grammar-backend xgrammar",
            param="tool_choice",
        )
    for i, tool in enumerate(tools):
        if isinstance(choice, NamedToolChoice) and tool.function.name != choice.function.name:
            continue
        refusal = await asyncio.to_thread(constraint_refusal, named_constraint(tool.function.parameters_schema()))
        if refusal is not None:
            where = f"tools.{i}.function.parameters"
            raise bad_request(
                f"{where}: a forced call's arguments cannot be held to this schema: {refusal}", param=where
            )
    if isinstance(choice, NamedToolChoice):
        tool = next(tool for tool in tools if tool.function.name == choice.function.name)
        return TurnPlan(
            TurnReading(calls=NamedCall(tool.function.name)),
            named_constraint(tool.function.parameters_schema()),
            forced=True,
        )
    functions = [(tool.function.name, tool.function.parameters_schema()) for tool in tools]
    constraint = required_constraint(functions, one)
    refusal = await asyncio.to_thread(constraint_refusal, constraint)
    if refusal is not None:
        raise bad_request(
            f"tools: the functions' schemas do not compile together as one choice of calls: {refusal}", param="tools"
        )
    return TurnPlan(TurnReading(calls=RequiredCalls(names), first_call_only=one), constraint, forced=True)


async def _auto_calls_constraint(tools: list[Tool], family: ToolCallParser, one: bool) -> OutputConstraint | None:
    """The grammar that holds the calls the model may write to their schemas (None where the
    calls are read unconstrained); a 400 for a strict function whose arguments it cannot hold."""
    constraint = None
    if get_serving().grammar_backend != "none":
        functions = [(tool.function.name, tool.function.parameters_schema()) for tool in tools]
        constraint = calls_constraint(family, functions, one)
        refusal = await asyncio.to_thread(constraint_refusal, constraint)
        if refusal is not None:
            raise bad_request(
                f"tools: the functions' schemas do not compile together as the calls' grammar: {refusal}", param="tools"
            )
    for i, tool in enumerate(tools):
        if not tool.function.strict:
            continue
        if constraint is None:
            raise bad_request(
                f"tools.{i}.function.strict: strict arguments of function {tool.function.name!r} cannot be held to "
                "its schema under tool_choice 'auto' here (the grammar backend is off); send strict false, or force "
                "the call with tool_choice 'required' or naming the function",
                param=f"tools.{i}.function.strict",
            )
        feature = unenforced_feature_of(tool.function.parameters_schema())
        if feature is not None:
            where = f"tools.{i}.function.parameters"
            raise bad_request(
                f"{where}: function {tool.function.name!r} is strict and its arguments cannot be held to this "
                f"schema: {feature}; send strict false, or a schema without it",
                param=where,
            )
    return constraint


def one_constraint(plan: TurnPlan, structured: OutputConstraint | None) -> OutputConstraint | None:
    """The output's constraint: a forced call's, else the request's structured output, else the
    grammar of the calls the model may write; a 400 when a forced call meets a structured output."""
    if plan.forced and structured is not None:
        raise bad_request(
            "tool_choice: a forced tool call constrains the output to the call, and the request's structured output "
            "(response_format, json_schema, regex, ebnf, structured_outputs or guided_*) constrains it too; send one "
            "of them",
            param="tool_choice",
        )
    return structured or plan.constraint
