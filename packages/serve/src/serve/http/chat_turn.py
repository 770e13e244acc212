"""How a chat request's assistant turns are read, and what constrains their output: decided as the
request arrives, from its tools and tool_choice and the serving leaves read at that moment
(reasoning_parser, tool_call_parser, grammar_backend).

- No tools, or tool_choice "none": the turn is content (and reasoning, with a reasoning parser);
  the template is still given the tools, as OpenAI's models still see them.
- "auto": the model may write calls, read in the family `serving.tool_call_parser` names, else the
  one the chat template writes (`serve.tool_calls.families`); with neither, a 400 asks the
  operator for --tool-call-parser, since the calls could not be read.
- "required" or a named function: the grammar engine forces the call (`serve.tool_calls.forced`);
  refused with a 400 when the grammar backend is off, when a forced function's schema uses a
  keyword the engine would not enforce (`serve.grammar.constraint_check`), and beside a structured
  output (`serve.http.output_constraints`): the one output cannot be both the call and the format.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from config_bags import get_serving
from runtime_scheduler import OutputConstraint
from serve.assistant.turn import FamilyCalls, NamedCall, RequiredCalls, TurnReading
from serve.grammar.constraint_check import constraint_refusal
from serve.http.errors import bad_request
from serve.http.protocol import ChatCompletionRequest
from serve.http.tool_fields import NamedToolChoice
from serve.tokenizer.worker import TokenizerWorker
from serve.tool_calls.families import FAMILIES, family_of_template
from serve.tool_calls.forced import named_constraint, required_constraint


@dataclass(frozen=True)
class TurnPlan:
    """How every choice's turn is read, and what its output must match (None: free text)."""

    reading: TurnReading
    constraint: OutputConstraint | None = None


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
        family = serving.tool_call_parser or family_of_template(await worker.chat_template())
        if family is None:
            raise bad_request(
                "tool_choice: 'auto' lets the model write tool calls, and this server cannot read them: no "
                "--tool-call-parser is set and the model's chat template writes no call syntax it knows; start the "
                f"server with --tool-call-parser {' | '.join(FAMILIES)} (or PATCH /v1/runtime_config "
                "tool_call_parser), or force the call with tool_choice 'required' or a named function",
                param="tool_choice",
            )
        return TurnPlan(TurnReading(serving.reasoning_parser, FamilyCalls(family, names), one))
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
            TurnReading(calls=NamedCall(tool.function.name)), named_constraint(tool.function.parameters_schema())
        )
    functions = [(tool.function.name, tool.function.parameters_schema()) for tool in tools]
    constraint = required_constraint(functions, one)
    refusal = await asyncio.to_thread(constraint_refusal, constraint)
    if refusal is not None:
        raise bad_request(
            f"tools: the functions' schemas do not compile together as one choice of calls: {refusal}", param="tools"
        )
    return TurnPlan(TurnReading(calls=RequiredCalls(names), first_call_only=one), constraint)


def one_constraint(plan: TurnPlan, structured: OutputConstraint | None) -> OutputConstraint | None:
    """The output's constraint: a forced call's, or the request's structured output; a 400 when
    the request asks for both."""
    if plan.constraint is not None and structured is not None:
        raise bad_request(
            "tool_choice: a forced tool call constrains the output to the call, and the request's structured output "
            "(response_format, json_schema, regex, ebnf, structured_outputs or guided_*) constrains it too; send one "
            "of them",
            param="tool_choice",
        )
    return plan.constraint or structured
