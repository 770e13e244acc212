"""The think-block splitter over texts reasoning models write: qwen3 (the model opens the block)
and deepseek-r1 (the prompt opens it), whole and split at every character, with the calls read
after the reasoning; and `</think>` that never comes."""

from __future__ import annotations

import pytest

from serve.assistant.events import Content, Reasoning
from serve.assistant_turn import FamilyCalls, TurnReading, answer_of, read_whole

QWEN3 = TurnReading(reasoning="qwen3")
R1 = TurnReading(reasoning="deepseek-r1")
QWEN3_TOOLS = TurnReading(reasoning="qwen3", calls=FamilyCalls("hermes", ("add",)))

# reading, text -> (reasoning, content, names called)
CASES: dict[str, tuple[TurnReading, str, str, str, list[str]]] = {
    "qwen3: a block, then the answer": (QWEN3, "<think>\nWhy?\n</think>\n\nBecause.", "\nWhy?\n", "Because.", []),
    "qwen3: no block is all content": (QWEN3, "Plain </think> answer", "", "Plain </think> answer", []),
    "qwen3: a block that never closes is reasoning": (QWEN3, "  <think>Still thinking", "Still thinking", "", []),
    "qwen3: the start of the tag alone is content": (QWEN3, "<thi", "", "<thi", []),
    "qwen3: calls after the reasoning": (
        QWEN3_TOOLS,
        '<think>I should add.</think>\n<tool_call>{"name": "add", "arguments": {}}</tool_call>',
        "I should add.",
        "",
        ["add"],
    ),
    "qwen3: a call inside the reasoning is reasoning": (
        QWEN3_TOOLS,
        '<think><tool_call>{"name": "add", "arguments": {}}</tool_call></think>ok',
        '<tool_call>{"name": "add", "arguments": {}}</tool_call>',
        "ok",
        [],
    ),
    "deepseek-r1: the prompt opened the block": (R1, "Let me see.</think>\n\nIt is 4.", "Let me see.", "It is 4.", []),
    "deepseek-r1: a tag the model writes anyway is dropped": (R1, "<think>Hm.</think>Yes.", "Hm.", "Yes.", []),
    "deepseek-r1: never closed is all reasoning": (R1, "Thinking and thinking", "Thinking and thinking", "", []),
    "deepseek-r1: the start of the closing tag at the end is reasoning": (R1, "Almost </thi", "Almost </thi", "", []),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_text_splits_the_same_whole_and_split_anywhere(name: str) -> None:
    """Reverse-verified: with `partial_marker` answering 0, every case whose block closes split
    differently when cut inside `</think>` (its first characters went out as reasoning and the
    block never closed)."""
    reading, text, reasoning, content, called = CASES[name]
    whole = read_whole(reading, text)
    assert (whole.reasoning, whole.content, [c.name for c in whole.calls]) == (reasoning, content, called)
    splits = [[text[:cut], text[cut:]] for cut in range(len(text) + 1)] + [list(text)]
    for pieces in splits:
        turn = reading.new_turn()
        answer = answer_of([e for piece in pieces for e in turn.feed(piece)] + turn.finish())
        assert (answer.reasoning, answer.content, [c.name for c in answer.calls]) == (reasoning, content, called), (
            pieces
        )


def test_reasoning_streams_as_it_comes() -> None:
    turn = R1.new_turn()
    assert turn.feed("Step one. </th") == [Reasoning("Step one. ")]
    assert turn.feed("ink> Done") == [Content("Done")]
    assert turn.finish() == []
