"""A chat choice's stream, chunk by chunk, assembled by the `openai` client's own accumulator
(`ChatCompletionStreamState`, what its stream helpers run) into the message the whole answer
gives: content, reasoning and tool calls, for the text arriving in any pieces."""

from __future__ import annotations

import re
from typing import Any

import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

from serve.assistant_turn import FamilyCalls, TurnReading
from serve.http.chat_choice import ChoiceStream, deltas_of, whole_choice
from serve.http.streams import ChoiceResult
from serve.ipc.messages import TextOutput

READING = TurnReading(reasoning="qwen3", calls=FamilyCalls("hermes", ("get_weather", "add")))
TEXT = (
    "<think>Two lookups.</think>\n\nChecking.\n"
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "note": "a \\"b\\""}}\n</tool_call>\n'
    '<tool_call>\n{"name": "add", "arguments": {"a": 1}}\n</tool_call>'
)


def chunk(choice: dict[str, Any]) -> ChatCompletionChunk:
    return ChatCompletionChunk.model_validate(
        {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [choice]}
    )


def assembled(pieces: list[str]) -> dict[str, Any]:
    """The message (and finish reason) the client assembles from the stream of `pieces`."""
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState()
    state.handle_chunk(chunk({"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}))
    stream = ChoiceStream(0, READING.new_turn(), logprobs=False)
    for i, piece in enumerate(pieces):
        out = TextOutput(rid="r", text=piece, new_ids=(), finish="stop" if i == len(pieces) - 1 else None)
        for choice in stream.chunks(out):
            state.handle_chunk(chunk(choice))
    final = state.get_final_completion().choices[0]
    message = final.message
    calls = [(c.function.name, c.function.arguments) for c in message.tool_calls or []]
    assert all(re.fullmatch("call_[0-9a-f]{24}", c.id) for c in message.tool_calls or [])
    reasoning = getattr(message, "reasoning_content", None)
    assert getattr(message, "reasoning", None) == reasoning  # the same text under its other name
    return {"content": message.content, "reasoning": reasoning, "calls": calls, "finish": final.finish_reason}


def whole() -> dict[str, Any]:
    choice = whole_choice(0, READING, ChoiceResult(text=TEXT, finish="stop"), logprobs=False)
    message = choice["message"]
    calls = [(c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]]
    assert message["reasoning"] == message["reasoning_content"]
    return {
        "content": message["content"],
        "reasoning": message["reasoning_content"],
        "calls": calls,
        "finish": choice["finish_reason"],
    }


@pytest.mark.parametrize("size", [1, 3, 7, len(TEXT)])
def test_the_client_assembles_the_whole_answer_from_the_stream(size: int) -> None:
    """Reverse-verified: with the call's id sent again on each arguments delta, the client
    concatenated the ids; with `finish_reason` passing "stop" through, the finish was "stop"; with
    reasoning written as reasoning_content alone, the message had no `reasoning`."""
    expected = whole()
    assert expected == {
        "content": "Checking.",
        "reasoning": "Two lookups.",
        "calls": [("get_weather", '{"city": "Paris", "note": "a \\"b\\""}'), ("add", '{"a": 1}')],
        "finish": "tool_calls",
    }
    assert assembled([TEXT[i : i + size] for i in range(0, len(TEXT), size)]) == expected


def test_a_call_opens_in_a_delta_of_its_own_then_its_arguments_follow() -> None:
    stream = ChoiceStream(0, READING.new_turn(), logprobs=False)
    first = stream.chunks(TextOutput(rid="r", text='<tool_call>{"name": "add", "arguments": {"a"', new_ids=()))
    opening, arguments = (c["delta"]["tool_calls"] for c in first)
    assert opening == [
        {"index": 0, "id": opening[0]["id"], "type": "function", "function": {"name": "add", "arguments": ""}}
    ]
    assert opening[0]["id"].startswith("call_") and arguments == [{"index": 0, "function": {"arguments": '{"a"'}}]
    last = stream.chunks(TextOutput(rid="r", text=": 1}}</tool_call>", new_ids=(), finish="stop"))
    assert [c["finish_reason"] for c in last] == ["tool_calls"]


def test_text_is_merged_and_held_text_makes_no_chunk() -> None:
    assert deltas_of([]) == []
    stream = ChoiceStream(0, TurnReading(calls=FamilyCalls("hermes", ("add",))).new_turn(), logprobs=False)
    assert stream.chunks(TextOutput(rid="r", text="<tool_", new_ids=(1,))) == []
    (done,) = stream.chunks(TextOutput(rid="r", text="", new_ids=(), finish="length"))
    assert done["delta"] == {"content": "<tool_"} and done["finish_reason"] == "length"
