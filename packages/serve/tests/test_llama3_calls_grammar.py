"""Llama 3's grammar under tool_choice "auto" (`serve.tool_calls.llama3.calls_constraint`), run by
xgrammar on whole answers: text answers and answers of calls whose arguments match their
function's schema are accepted; a call with other arguments, an unknown function or an answer
opening with another JSON object is not; with one call allowed, a second is not."""

from __future__ import annotations

import json
from typing import Any

import pytest
import xgrammar as xgr
from xgrammar.testing import _is_grammar_accept_string

from serve.tool_calls.llama3 import calls_constraint

CITY: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string", "enum": ["Paris", "Lima"]}},
    "required": ["city"],
    "additionalProperties": False,
}
PARIS = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
LIMA = '{"name": "get_weather", "parameters": {\n  "city": "Lima"\n}}'

ACCEPTED = ["It is sunny.", '\n\nSee {"a": 1} here.', "", PARIS, f"  {PARIS}", f"{PARIS}; {LIMA}"]
REFUSED = [
    '{"name": "get_weather", "parameters": {"city": "Rome"}}',  # not in the schema's enum
    '{"name": "get_time", "parameters": {}}',  # no such function
    '{"a": 1}',  # an answer opening with an object is calls
    f"{PARIS}; ",
]


def accepts(one: bool, answer: str) -> bool:
    grammar = xgr.Grammar.from_structural_tag(calls_constraint([("get_weather", CITY)], one).text)
    return bool(_is_grammar_accept_string(grammar, answer))


@pytest.mark.parametrize("answer", ACCEPTED)
def test_text_and_calls_matching_their_schemas_are_accepted(answer: str) -> None:
    assert accepts(False, answer)


@pytest.mark.parametrize("answer", REFUSED)
def test_calls_off_their_schemas_are_refused(answer: str) -> None:
    """Reverse-verified: with the calls' tags given any JSON object as content (the schema
    dropped), the first case was accepted."""
    assert not accepts(False, answer)


def test_one_call_allowed_ends_the_answer_after_it() -> None:
    assert accepts(True, PARIS) and not accepts(True, f"{PARIS}; {LIMA}")
    assert json.loads(calls_constraint([("get_weather", CITY)], True).text)["type"] == "structural_tag"
