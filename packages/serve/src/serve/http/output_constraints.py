"""A request's output constraint, from whichever spelling the client used: OpenAI's
`response_format`, SGLang's `json_schema` / `regex` / `ebnf`, vLLM's `structured_outputs` and its
older `guided_*` fields. At most one may be sent; each becomes the canonical `OutputConstraint`
the scheduler compiles (a JSON schema as compact JSON text, a choice as an EBNF alternation), and
is checked before the request is queued: a constraint the grammar engine cannot parse or would
not enforce is the client's 400, naming the field, with the engine's own message.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from config_bags.server import get_serving
from runtime_scheduler import OutputConstraint
from runtime_scheduler.request import ConstraintKind
from serve.grammar.constraint_check import constraint_refusal
from serve.http.errors import bad_request
from serve.http.protocol import OpenAIRequest, SamplingFields
from serve.http.structured_output_fields import ResponseFormat, StructuredOutputs

# What `json_object` asks for: any JSON object.
ANY_JSON_OBJECT = json.dumps({"type": "object"})


async def output_constraint(fields: SamplingFields, prefix: str = "") -> OutputConstraint | None:
    """The constraint `fields` ask for (None: free text), checked off the event loop; refused with
    a 400 naming the field (its path below the body: `prefix` + its name) when two fields ask for
    one, when the grammar backend is off, or when the engine cannot serve it."""
    asked = _asked_constraints(fields, prefix)
    if not asked:
        return None
    if len(asked) > 1:
        names = " and ".join(param for param, _ in asked)
        raise bad_request(f"{asked[1][0]}: {names} each constrain the output; send one of them", param=asked[1][0])
    param, constraint = asked[0]
    if get_serving().grammar_backend == "none":
        raise bad_request(
            f"{param}: this server constrains no output (its grammar_backend is none); "
            "restart it with --grammar-backend xgrammar, or send the request without a constraint",
            param=param,
        )
    refusal = await asyncio.to_thread(constraint_refusal, constraint)
    if refusal is not None:
        raise bad_request(f"{param}: {refusal}", param=param)
    return constraint


def _asked_constraints(fields: SamplingFields, prefix: str) -> list[tuple[str, OutputConstraint]]:
    """(field path, constraint) of every field of `fields` that asks for one."""
    asked: list[tuple[str, OutputConstraint]] = []
    if isinstance(fields, OpenAIRequest) and fields.response_format is not None:
        asked.extend(_response_format_constraints(fields.response_format))
    for name, given in (("json_schema", fields.json_schema), ("guided_json", fields.guided_json)):
        if given is not None:
            asked.append((prefix + name, _schema_constraint(given, prefix + name)))
    for name, regex in (("regex", fields.regex), ("guided_regex", fields.guided_regex)):
        if regex is not None:
            asked.append((prefix + name, _text_constraint("regex", regex, prefix + name)))
    for name, grammar in (("ebnf", fields.ebnf), ("guided_grammar", fields.guided_grammar)):
        if grammar is not None:
            asked.append((prefix + name, _text_constraint("ebnf", grammar, prefix + name)))
    if fields.guided_choice is not None:
        asked.append((prefix + "guided_choice", _choice_constraint(fields.guided_choice, prefix + "guided_choice")))
    if fields.structured_outputs is not None:
        asked.extend(_structured_outputs_constraints(fields.structured_outputs, prefix + "structured_outputs."))
    return asked


def _response_format_constraints(form: ResponseFormat) -> list[tuple[str, OutputConstraint]]:
    if form.type == "json_object":
        return [("response_format", OutputConstraint(kind="json_schema", text=ANY_JSON_OBJECT))]
    if form.type == "json_schema":
        if form.json_schema is None:
            raise bad_request(
                "response_format.json_schema: type json_schema needs a json_schema object ({name, schema, strict})",
                param="response_format.json_schema",
            )
        param = "response_format.json_schema.schema"
        return [(param, _schema_constraint(form.json_schema.schema_, param))]
    return []


def _structured_outputs_constraints(outputs: StructuredOutputs, prefix: str) -> list[tuple[str, OutputConstraint]]:
    asked: list[tuple[str, OutputConstraint]] = []
    if outputs.json_ is not None:
        asked.append((prefix + "json", _schema_constraint(outputs.json_, prefix + "json")))
    if outputs.regex is not None:
        asked.append((prefix + "regex", _text_constraint("regex", outputs.regex, prefix + "regex")))
    if outputs.choice is not None:
        asked.append((prefix + "choice", _choice_constraint(outputs.choice, prefix + "choice")))
    if outputs.grammar is not None:
        asked.append((prefix + "grammar", _text_constraint("ebnf", outputs.grammar, prefix + "grammar")))
    if outputs.json_object:
        asked.append((prefix + "json_object", OutputConstraint(kind="json_schema", text=ANY_JSON_OBJECT)))
    if not asked:
        whole = prefix.rstrip(".")
        raise bad_request(
            f"{whole}: asks for nothing; send one of json, regex, choice, grammar or json_object: true", param=whole
        )
    return asked


def _schema_constraint(schema: dict[str, Any] | str | bool, param: str) -> OutputConstraint:
    """A JSON-schema constraint, its text compact and in the client's key order (the order the
    output's properties follow)."""
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as err:
            raise bad_request(f"{param}: the schema is not valid JSON: {err}", param=param) from None
    if not isinstance(schema, dict | bool):
        raise bad_request(
            f"{param}: a JSON schema is an object (or true/false), got {type(schema).__name__}", param=param
        )
    return OutputConstraint(kind="json_schema", text=json.dumps(schema, separators=(",", ":"), ensure_ascii=False))


def _text_constraint(kind: ConstraintKind, text: str, param: str) -> OutputConstraint:
    if not text:
        raise bad_request(f"{param}: empty; send a non-empty {kind}", param=param)
    return OutputConstraint(kind=kind, text=text)


def _choice_constraint(choices: list[str], param: str) -> OutputConstraint:
    """The output is exactly one of `choices`: an EBNF alternation of string literals."""
    if not choices:
        raise bad_request(f"{param}: empty; send at least one string to choose from", param=param)
    return OutputConstraint(kind="ebnf", text="root ::= " + " | ".join(_ebnf_literal(c) for c in choices))


def _ebnf_literal(text: str) -> str:
    """`text` as an EBNF string literal: JSON's escapes, which the grammar engine reads the same."""
    return json.dumps(text, ensure_ascii=False)
