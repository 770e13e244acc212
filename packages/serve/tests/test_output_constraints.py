"""The constraint each spelling of structured output becomes, and the check it passes before its
request is queued: the grammar engine's own parse, and the schema keywords it would not enforce."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from xgrammar.testing import _is_grammar_accept_string as grammar_accepts

import config_bags
from config_bags.server import Bags, ServingBag
from runtime_scheduler import OutputConstraint
from serve.grammar.constraint_check import constraint_refusal
from serve.grammar.schema_support import unenforced_feature_of
from serve.grammar.xgrammar_engine import grammar_of
from serve.http.errors import APIError
from serve.http.output_constraints import ANY_JSON_OBJECT, output_constraint
from serve.http.protocol import ChatCompletionRequest, SamplingFields

USER = [{"role": "user", "content": "Hi"}]


@pytest.fixture(autouse=True)
def published() -> Iterator[None]:
    """The HTTP process reads serving.grammar_backend when a request asks for a constraint."""
    config_bags.publish(Bags(serving=ServingBag()), role="http")
    yield
    config_bags.unpublish()


def constraint_of(fields: SamplingFields, prefix: str = "") -> OutputConstraint | None:
    return asyncio.run(output_constraint(fields, prefix))


def chat(**fields: Any) -> ChatCompletionRequest:
    return ChatCompletionRequest.model_validate({"messages": USER, **fields})


def refusal_of(fields: SamplingFields, prefix: str = "") -> APIError:
    with pytest.raises(APIError) as caught:
        constraint_of(fields, prefix)
    return caught.value


def test_each_spelling_of_a_schema_becomes_the_same_constraint() -> None:
    """OpenAI's response_format, SGLang's json_schema (object or text), vLLM's structured_outputs
    and guided_json: one compact text in the client's key order, so they share a compiled grammar."""
    schema = {"type": "object", "properties": {"b": {"type": "integer"}, "a": {"type": "string"}}}
    expected = OutputConstraint(
        kind="json_schema", text='{"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}}}'
    )
    spellings = [
        chat(response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": True}}),
        chat(json_schema=schema),
        chat(json_schema=json.dumps(schema, indent=2)),
        chat(structured_outputs={"json": schema}),
        chat(guided_json=schema),
        SamplingFields.model_validate({"json_schema": schema}),
    ]
    assert [constraint_of(fields) for fields in spellings] == [expected] * len(spellings)


def test_json_object_is_any_object_not_only_the_empty_one() -> None:
    constraint = constraint_of(chat(response_format={"type": "json_object"}))
    assert constraint == OutputConstraint(kind="json_schema", text=ANY_JSON_OBJECT)
    assert grammar_accepts(grammar_of(constraint), '{"name": "Paris", "sizes": [1, 2]}')


def test_a_choice_is_exactly_one_of_its_strings_escapes_and_all() -> None:
    choices = ['say "hi"', "back\\slash", "new\nline", "été"]
    for fields in (chat(guided_choice=choices), chat(structured_outputs={"choice": choices})):
        constraint = constraint_of(fields)
        assert constraint is not None and constraint.kind == "ebnf"
        grammar = grammar_of(constraint)
        assert all(grammar_accepts(grammar, c) for c in choices)
        assert not grammar_accepts(grammar, "say hi")


def test_regex_and_ebnf_pass_through() -> None:
    assert constraint_of(chat(regex="[0-9]+")) == OutputConstraint(kind="regex", text="[0-9]+")
    assert constraint_of(chat(structured_outputs={"grammar": 'root ::= "a"'})) == OutputConstraint(
        kind="ebnf", text='root ::= "a"'
    )
    assert constraint_of(chat()) is None
    assert constraint_of(chat(response_format={"type": "text"})) is None


@pytest.mark.parametrize(
    ("fields", "prefix", "param", "message"),
    [
        (chat(regex="a", ebnf='root ::= "a"'), "", "ebnf", "regex and ebnf each constrain the output"),
        (chat(regex="[a-"), "", "regex", "Unclosed '['"),
        (chat(json_schema="{not json"), "", "json_schema", "the schema is not valid JSON"),
        (chat(json_schema={"type": "strin"}), "", "json_schema", 'Unsupported type "strin"'),
        (chat(response_format={"type": "json_schema"}), "", "response_format.json_schema", "needs a json_schema"),
        (chat(structured_outputs={}), "", "structured_outputs", "asks for nothing"),
        (chat(guided_choice=[]), "", "guided_choice", "send at least one string"),
        (SamplingFields(ebnf="root ::= x"), "sampling_params.", "sampling_params.ebnf", 'Rule "x" is not defined'),
    ],
)
def test_a_bad_constraint_is_a_400_naming_its_field(
    fields: SamplingFields, prefix: str, param: str, message: str
) -> None:
    error = refusal_of(fields, prefix)
    body = error.body()["error"]
    assert error.status == 400 and body["param"] == param, body
    assert body["message"].startswith(f"{param}: ") and message in body["message"], body


def test_with_the_grammar_backend_off_a_constraint_is_refused_and_free_text_served() -> None:
    """Reverse-verified: without the grammar_backend check, the regex was accepted."""
    config_bags.unpublish()
    config_bags.publish(Bags(serving=ServingBag(grammar_backend="none")), role="http")
    error = refusal_of(chat(regex="a+"))
    assert error.param == "regex" and "grammar_backend is none" in error.message
    assert constraint_of(chat()) is None


@pytest.mark.parametrize(
    ("schema", "keyword"),
    [
        ({"not": {"type": "string"}}, "'not' at #"),
        ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "'uniqueItems' at #"),
        ({"type": "object", "properties": {"a": {"if": {}, "then": {}}}}, "'if' at #/properties/a"),
        ({"type": "object", "dependentRequired": {"a": ["b"]}}, "'dependentRequired' at #"),
        ({"$defs": {"x/y": {"type": "number", "multipleOf": 0.5}}}, "'multipleOf' at #/$defs/x~1y"),
        ({"anyOf": [{"type": "string", "format": "iri"}]}, "'format': 'iri' at #/anyOf/0"),
        ({"allOf": [{"type": "object"}, {"required": ["a"]}]}, "'allOf' with 2 branches at #"),
        ({"type": "integer", "multipleOf": 3, "minimum": 0}, "'multipleOf' with a range at #"),
        ({"type": "string", "format": "email", "maxLength": 9}, "'maxLength' beside 'format' at #"),
        ({"type": "string", "pattern": "a+", "minLength": 2}, "'minLength' beside 'pattern' at #"),
        ({"type": "string", "pattern": "(?!b)a"}, "lookaround in 'pattern' at #"),
    ],
)
def test_a_schema_keyword_the_engine_would_not_enforce_is_named(schema: dict[str, Any], keyword: str) -> None:
    """Reverse-verified: without `unenforced_feature_of` in `constraint_refusal`, each of these
    compiled and was served with a grammar that accepts what the keyword forbids."""
    refusal = constraint_refusal(OutputConstraint(kind="json_schema", text=json.dumps(schema)))
    assert refusal is not None and keyword in refusal, refusal


def test_keywords_the_engine_enforces_pass_and_property_names_are_not_keywords() -> None:
    schema = {
        "type": "object",
        "properties": {
            "not": {"type": "string", "format": "email"},
            "if": {"type": "integer", "multipleOf": 3},
            "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2},
        },
        "required": ["not"],
    }
    assert unenforced_feature_of(schema) is None
    assert constraint_refusal(OutputConstraint(kind="json_schema", text=json.dumps(schema))) is None
    grammar = grammar_of(OutputConstraint(kind="json_schema", text=json.dumps(schema)))
    assert grammar_accepts(grammar, '{"not": "a@b.co", "if": 6}')
    assert not grammar_accepts(grammar, '{"not": "a@b.co", "if": 7}')
