"""End to end, the thinking budget (`thinking_budget`, `reasoning_effort`, `reasoning.effort`) on the
real default model through the official `openai` client, with the reasoning parser set while
serving (and unset after). The default model opens no think block of its own and never closes
one: under deepseek-r1 (the prompt opens the block) all it writes is reasoning, so a spent budget
shows the server closing the block and the answer following; under qwen3 (the model would open
it) there is no block, so a budget changes nothing, token for token."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from serve_testing.server import ServerProcess

pytestmark = pytest.mark.timeout(600)

MODEL = "SmolLM2-135M-Instruct"
MESSAGES: list[Any] = [{"role": "user", "content": "Tell me a long story about a dragon and a knight."}]
GREEDY: dict[str, Any] = {"model": MODEL, "messages": MESSAGES, "temperature": 0}


@pytest.fixture(scope="module")
def server(default_model_server: ServerProcess) -> ServerProcess:
    return default_model_server


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url + "/v1", api_key="unused", timeout=300, max_retries=0)


@pytest.fixture
def parser(server: ServerProcess) -> Iterator[Any]:
    """`set(name)`: the reasoning parser while the test runs; none after it."""

    def set_parser(name: str | None) -> None:
        answer = httpx.patch(server.base_url + "/v1/runtime_config", json={"reasoning_parser": name}, timeout=60)
        assert answer.status_code == 200, answer.text

    yield set_parser
    set_parser(None)


def message_of(client: openai.OpenAI, budget: int | None = None, **fields: Any) -> Any:
    """The message, finish reason and usage of a greedy chat (thinking at most `budget` tokens)."""
    extra = None if budget is None else {"thinking_budget": budget}
    completion = client.chat.completions.create(**GREEDY, **fields, extra_body=extra)
    return completion.choices[0].message, completion.choices[0].finish_reason, completion.usage


def test_a_spent_budget_closes_the_think_block_and_the_answer_follows(client: openai.OpenAI, parser: Any) -> None:
    """With thinking_budget 8 the reasoning is the text of the 8 tokens the model thinks first
    (what an unbudgeted request of 8 tokens gives, all reasoning), then the server closes the block
    and the answer follows as content; the same again, whole and streamed.

    Reverse-verified: with `budgeted` continuing without the end marker's tokens, the reasoning
    ran on past the budget (the whole 48 tokens) and was not the 8 tokens' text."""
    parser("deepseek-r1")
    thought, finish, _ = message_of(client, max_tokens=8)
    assert finish == "length" and thought.content is None and thought.reasoning_content
    answer, finish, usage = message_of(client, 8, max_tokens=48)
    assert answer.reasoning_content == thought.reasoning_content == answer.reasoning
    assert answer.content and "</think>" not in answer.content
    assert usage is not None and 8 < usage.completion_tokens <= 48
    again, _, _ = message_of(client, 8, max_tokens=48)
    assert again.model_dump() == answer.model_dump()
    deltas: dict[str, str] = {"content": "", "reasoning_content": ""}
    stream = client.chat.completions.create(**GREEDY, max_tokens=48, stream=True, extra_body={"thinking_budget": 8})
    for chunk in stream:
        for key in deltas:
            deltas[key] += getattr(chunk.choices[0].delta, key, None) or "" if chunk.choices else ""
    assert deltas == {"content": answer.content, "reasoning_content": answer.reasoning_content}


def test_a_budget_never_reached_changes_nothing(client: openai.OpenAI, parser: Any) -> None:
    """Under qwen3 the model's answer opens no block: with a budget of 4 tokens the answer is
    written in two requests (the second continuing the first's tokens from the prefix cache), and
    is the unbudgeted answer token for token."""
    parser("qwen3")
    plain, _, plain_usage = message_of(client, max_tokens=24)
    split, _, split_usage = message_of(client, max_tokens=24, reasoning_effort="low")
    assert split.content == plain.content
    budgeted, _, budgeted_usage = message_of(client, 4, max_tokens=24)
    assert budgeted.content == plain.content and budgeted.reasoning_content is None
    assert plain_usage is not None and budgeted_usage is not None and split_usage is not None
    assert budgeted_usage.completion_tokens == plain_usage.completion_tokens == split_usage.completion_tokens


def test_responses_take_reasoning_effort_and_a_budget(client: openai.OpenAI, parser: Any) -> None:
    """`reasoning.effort` is echoed and bounds the thinking (low: 1024 tokens, more than this
    answer's 16, so the output is the unbudgeted one); `thinking_budget` 8 gives a reasoning item
    then the answer's message."""
    parser("deepseek-r1")
    body: dict[str, Any] = {"model": MODEL, "input": MESSAGES[0]["content"], "temperature": 0, "max_output_tokens": 16}
    plain = client.responses.create(**body)
    low = client.responses.create(**body, reasoning={"effort": "low"})
    assert low.reasoning is not None and low.reasoning.effort == "low"
    assert [item.model_dump(exclude={"id"}) for item in low.output] == [
        item.model_dump(exclude={"id"}) for item in plain.output
    ]
    budgeted = client.responses.create(**{**body, "max_output_tokens": 48}, extra_body={"thinking_budget": 8})
    assert [item.type for item in budgeted.output] == ["reasoning", "message"] and budgeted.output_text


def test_a_budget_is_refused_where_nothing_could_keep_it(client: openai.OpenAI, parser: Any) -> None:
    """Without a reasoning parser there is no block to close; a constrained output has no block;
    an effort and a budget both are two budgets. Each a 400 naming the field."""
    for fields in ({}, {"reasoning_effort": "high"}):
        with pytest.raises(openai.BadRequestError) as refused:
            client.chat.completions.create(**GREEDY, max_tokens=8, **fields, extra_body={"thinking_budget": 8})
        assert refused.value.body["param"] == "thinking_budget", refused.value.body  # type: ignore[index]
    parser("deepseek-r1")
    with pytest.raises(openai.BadRequestError) as constrained:
        client.chat.completions.create(
            **GREEDY, max_tokens=8, reasoning_effort="medium", response_format={"type": "json_object"}
        )
    assert constrained.value.body["param"] == "reasoning_effort"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as responses:
        client.responses.create(model=MODEL, input="Hi", reasoning={"effort": "max"})  # type: ignore[typeddict-item]
    assert responses.value.body["message"].startswith("reasoning.effort: ")  # type: ignore[index]
