"""How a chat request's turns are read, decided with a real tokenizer worker over a tiny tokenizer
whose template renders no tools, and the serving leaves as published (or overridden) at that
moment: "auto" reads the server's generic `<tool_call>` format, held to the schemas by a
structural tag, until tool_call_parser names another; forced calls carry their constraint, and
are refused with the grammar backend off. The parser inferred from the `<tool_call>` and Llama 3
templates is read off real tokenizers."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from config_bags import overriding, publish, unpublish
from config_bags.server import Bags, ModelBag
from runtime_scheduler import OutputConstraint
from serve.assistant_turn import FamilyCalls, NamedCall, RequiredCalls, TurnReading
from serve.http.chat_turn import TurnPlan, one_constraint, turn_plan
from serve.http.errors import APIError
from serve.http.protocol import ChatCompletionRequest
from serve.http.tool_fields import NO_PARAMETERS
from serve.tokenizer.chat_template import chat_template_text
from serve.tokenizer.worker import TokenizerWorker
from serve.tool_calls.families import calls_constraint, family_of_template
from serve_testing.tiny_checkpoint import build_tokenizer
from serve_testing.tool_templates import HERMES_TEMPLATE, LLAMA3_TEMPLATE, with_chat_template

pytestmark = pytest.mark.timeout(300)

ADD = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
TOOLS = [
    {"type": "function", "function": {"name": "add", "parameters": ADD}},
    {"type": "function", "function": {"name": "ping"}},
]


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("plain-template")
    build_tokenizer(folder)  # the tiny ChatML template: no tools rendered
    return folder


@pytest.fixture(scope="module")
def worker(tokenizer_dir: Path) -> Iterator[TokenizerWorker]:
    publish(Bags(model=ModelBag(model_path=str(tokenizer_dir))), role="launcher")
    running = TokenizerWorker()
    try:
        deadline = time.monotonic() + 120
        while running.state() is not None:
            assert time.monotonic() < deadline, running.state()
            time.sleep(0.05)
        yield running
    finally:
        running.close()
        unpublish()


def plan(worker: TokenizerWorker, **fields: Any) -> TurnPlan:
    body = ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "Hi"}], **fields})
    return asyncio.run(turn_plan(body, worker))


def refusal(worker: TokenizerWorker, **fields: Any) -> APIError:
    with pytest.raises(APIError) as caught:
        plan(worker, **fields)
    assert caught.value.status == 400 and caught.value.param == "tool_choice"
    return caught.value


def test_auto_reads_the_generic_format_held_to_the_schemas(worker: TokenizerWorker) -> None:
    """With no parser and a template without tool syntax, "auto" reads `<tool_call>` calls and
    holds them to the schemas (one call at most with parallel_tool_calls false); a parser named
    by the operator is read instead, Llama 3's held by its own grammar (strict functions served).
    Reverse-verified: with `turn_plan` planning no constraint under "auto", the first assertion
    failed (a strict call would have been read unconstrained)."""
    strict = [{**TOOLS[0], "function": {**TOOLS[0]["function"], "strict": True}}, TOOLS[1]]
    auto = plan(worker, tools=strict)
    assert auto.reading == TurnReading(calls=FamilyCalls("hermes", ("add", "ping")))
    assert auto.constraint is not None and auto.constraint.kind == "structural_tag" and not auto.forced
    tag = json.loads(auto.constraint.text)["format"]
    assert tag["triggers"] == ["<tool_call>"] and tag["stop_after_first"] is False
    assert [t["content"]["json_schema"] for t in tag["tags"]] == [ADD, NO_PARAMETERS]
    one = plan(worker, tools=TOOLS, parallel_tool_calls=False)
    assert one.reading.first_call_only and one.constraint is not None
    assert json.loads(one.constraint.text)["format"]["stop_after_first"] is True
    with overriding(tool_call_parser="llama3"):
        llama3 = plan(worker, tools=strict)
        assert llama3.reading == TurnReading(calls=FamilyCalls("llama3", ("add", "ping")))
        assert llama3.constraint == calls_constraint("llama3", [("add", ADD), ("ping", NO_PARAMETERS)], False)
    with overriding(tool_call_parser="qwen25", reasoning_parser="qwen3"):
        reading = plan(worker, tools=TOOLS, parallel_tool_calls=False).reading
        assert reading == TurnReading("qwen3", FamilyCalls("qwen25", ("add", "ping")), first_call_only=True)


def test_without_tools_or_with_none_the_turn_is_content(worker: TokenizerWorker) -> None:
    assert plan(worker) == TurnPlan(TurnReading())
    assert plan(worker, tools=TOOLS, tool_choice="none") == TurnPlan(TurnReading())
    with overriding(reasoning_parser="deepseek-r1"):
        assert plan(worker) == TurnPlan(TurnReading(reasoning="deepseek-r1"))


def test_forced_calls_carry_their_constraint(worker: TokenizerWorker) -> None:
    """Forced calls need no parser (this template names none) and read no reasoning, even with a
    reasoning parser set: the grammar makes the output the call from its first token."""
    with overriding(reasoning_parser="qwen3"):
        named = plan(worker, tools=TOOLS, tool_choice={"type": "function", "function": {"name": "add"}})
        required = plan(worker, tools=TOOLS, tool_choice="required", parallel_tool_calls=False)
    assert named.reading == TurnReading(calls=NamedCall("add"))
    assert named.constraint is not None and json.loads(named.constraint.text) == ADD
    assert required.reading == TurnReading(calls=RequiredCalls(("add", "ping")), first_call_only=True)
    assert required.constraint is not None and json.loads(required.constraint.text)["maxItems"] == 1
    free = [{"type": "function", "function": {"name": "free", "parameters": {}}}]
    anything = plan(worker, tools=free, tool_choice={"type": "function", "function": {"name": "free"}}).constraint
    assert anything is not None and json.loads(anything.text) == {"type": "object"}  # arguments are an object


def test_a_forced_call_and_a_structured_output_are_not_both_served(worker: TokenizerWorker) -> None:
    """Reverse-verified: with `one_constraint` preferring the forced call, a request with both was
    served, its response_format silently dropped."""
    structured = OutputConstraint(kind="regex", text="[a-z]+")
    forced = plan(worker, tools=TOOLS, tool_choice="required")
    with pytest.raises(APIError) as caught:
        one_constraint(forced, structured)
    assert caught.value.param == "tool_choice" and "structured output" in caught.value.message
    assert one_constraint(forced, None) == forced.constraint
    assert one_constraint(plan(worker, tools=TOOLS, tool_choice="none"), structured) == structured
    auto = plan(worker, tools=TOOLS)  # the calls' grammar gives way to the format the client asked for
    assert one_constraint(auto, structured) == structured and one_constraint(auto, None) == auto.constraint


def test_a_forced_call_is_refused_a_schema_the_engine_would_not_hold(worker: TokenizerWorker) -> None:
    """A schema keyword the engine compiles but does not enforce (`uniqueItems`) is refused where
    the call is forced, naming the function's parameters; offered to a model free to call it, it
    is served with the calls' grammar (the keyword left to the model), unless strict.
    Reverse-verified: without the check in `turn_plan`, the forced request was planned with a
    constraint that lets repeated items through."""
    unique = {"type": "object", "properties": {"ids": {"type": "array", "uniqueItems": True}}}
    tools = [TOOLS[1], {"type": "function", "function": {"name": "tag", "parameters": unique}}]
    with pytest.raises(APIError) as caught:
        plan(worker, tools=tools, tool_choice="required")
    assert caught.value.param == "tools.1.function.parameters" and "unique" in caught.value.message
    assert plan(worker, tools=tools, tool_choice={"type": "function", "function": {"name": "ping"}}).constraint
    with overriding(tool_call_parser="hermes"):
        assert plan(worker, tools=tools).constraint is not None
        strict = [tools[0], {**tools[1], "function": {**tools[1]["function"], "strict": True}}]
        with pytest.raises(APIError) as caught:
            plan(worker, tools=strict)
        assert caught.value.param == "tools.1.function.parameters" and "unique" in caught.value.message


def test_forced_calls_are_refused_with_the_grammar_backend_off(worker: TokenizerWorker) -> None:
    """And under "auto" the calls are read unconstrained, a strict function refused."""
    with overriding(grammar_backend="none"):
        for choice in ("required", {"type": "function", "function": {"name": "ping"}}):
            assert "--grammar-backend none" in refusal(worker, tools=TOOLS, tool_choice=choice).message
        assert plan(worker, tools=TOOLS).constraint is None
        strict = [{**TOOLS[1], "function": {**TOOLS[1]["function"], "strict": True}}]
        with pytest.raises(APIError) as caught:
            plan(worker, tools=strict)
        assert caught.value.param == "tools.0.function.strict" and "grammar backend is off" in caught.value.message


@pytest.mark.parametrize(
    ("template", "family"),
    [(HERMES_TEMPLATE, "hermes"), (LLAMA3_TEMPLATE, "llama3"), (None, None), (HERMES_TEMPLATE + LLAMA3_TEMPLATE, None)],
)
def test_the_family_is_read_off_the_template(
    tokenizer_dir: Path, tmp_path: Path, template: str | None, family: str | None
) -> None:
    """A template naming one family names it; the plain template, or one writing both, names none."""
    from transformers import AutoTokenizer

    folder = tmp_path / "tokenizer"
    folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        (folder / name).write_bytes((tokenizer_dir / name).read_bytes())
    if template is not None:
        with_chat_template(folder, template)
    assert family_of_template(chat_template_text(AutoTokenizer.from_pretrained(folder))) == family


def test_the_worker_tells_its_template(worker: TokenizerWorker, tokenizer_dir: Path) -> None:
    assert asyncio.run(worker.chat_template()) == (tokenizer_dir / "chat_template.jinja").read_text()
