"""The tool-call readers over texts a model writes (hermes / qwen25 `<tool_call>` blocks, Llama 3
JSON objects, a forced "required" array, a named call's arguments): what each text reads as
whole, and that a stream of it split at any character (and fed a character at a time) reads the
same; arguments stream before their call ends; text that may begin a marker is held back and
nothing else is."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from serve.assistant.events import Arguments, CallOpened, Content, Event
from serve.assistant_turn import FamilyCalls, NamedCall, RequiredCalls, TurnAnswer, TurnReading, answer_of, read_whole

NAMES = ("get_weather", "add")
HERMES = TurnReading(calls=FamilyCalls("hermes", NAMES))
QWEN25 = TurnReading(calls=FamilyCalls("qwen25", NAMES))
LLAMA3 = TurnReading(calls=FamilyCalls("llama3", NAMES))
REQUIRED = TurnReading(calls=RequiredCalls(NAMES))

Calls = list[tuple[str, str]]
# reading, text -> (content, calls as (name, arguments))
CASES: dict[str, tuple[TurnReading, str, str, Calls]] = {
    "hermes: content then two calls": (
        HERMES,
        'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "add", "arguments": {"a": 1, "b": [2, {"c": "}"}]}}\n</tool_call>',
        "Let me look.",
        [("get_weather", '{"city": "Paris"}'), ("add", '{"a": 1, "b": [2, {"c": "}"}]}')],
    ),
    "hermes: a closing tag inside a string argument": (
        HERMES,
        '<tool_call>{"name": "add", "arguments": {"s": "</tool_call> \\" {"}}</tool_call>',
        "",
        [("add", '{"s": "</tool_call> \\" {"}')],
    ),
    "hermes: content after the call": (
        HERMES,
        '<tool_call>{"name": "add"}</tool_call>\n\nDone.',
        "Done.",
        [("add", "{}")],
    ),
    "hermes: arguments before the name": (
        HERMES,
        '<tool_call>{"arguments": {"x": [1, 2]}, "name": "add"}</tool_call>',
        "",
        [("add", '{"x": [1, 2]}')],
    ),
    "hermes: parameters for arguments": (
        HERMES,
        '<tool_call>{"name": "add", "parameters": {"a": 1}}</tool_call>',
        "",
        [("add", '{"a": 1}')],
    ),
    "hermes: a name no tool has is content": (
        HERMES,
        'Hi <tool_call>\n{"name": "divide", "arguments": {}}\n</tool_call> there',
        'Hi <tool_call>\n{"name": "divide", "arguments": {}}\n</tool_call> there',
        [],
    ),
    "hermes: a tag followed by prose is content": (HERMES, "use <tool_call> tags", "use <tool_call> tags", []),
    "hermes: arguments that are no object are content": (
        HERMES,
        '<tool_call>{"name": "add", "arguments": "{}"}</tool_call>',
        '<tool_call>{"name": "add", "arguments": "{}"}</tool_call>',
        [],
    ),
    "hermes: a call cut off keeps its arguments so far": (
        HERMES,
        'Sure <tool_call>{"name": "add", "arguments": {"a": 12',
        "Sure",
        [("add", '{"a": 12')],
    ),
    "hermes: the start of a tag at the end is content": (HERMES, "so <tool_", "so <tool_", []),
    "hermes: no calls, spaces kept": (HERMES, "  a < b  \n", "  a < b  \n", []),
    "qwen25 writes hermes's calls": (
        QWEN25,
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Lima"}}\n</tool_call>',
        "",
        [("get_weather", '{"city": "Lima"}')],
    ),
    "llama3: calls opening the answer, separated": (
        LLAMA3,
        ' {"name": "add", "parameters": {"a": 1}}; {"name": "get_weather", "parameters": {"city": "x"}}',
        "",
        [("add", '{"a": 1}'), ("get_weather", '{"city": "x"}')],
    ),
    "llama3: a call after the python tag": (
        LLAMA3,
        'Sure. <|python_tag|>{"name": "add", "parameters": {}}',
        "Sure.",
        [("add", "{}")],
    ),
    "llama3: JSON that is no call is content": (LLAMA3, '{"a": 1} is JSON', '{"a": 1} is JSON', []),
    "llama3: JSON later in the answer is content": (
        LLAMA3,
        'Call {"name": "add", "parameters": {}} yourself',
        'Call {"name": "add", "parameters": {}} yourself',
        [],
    ),
    "llama3: a built-in tool's Python call is content": (
        LLAMA3,
        '<|python_tag|>brave_search.call(query="x")',
        '<|python_tag|>brave_search.call(query="x")',
        [],
    ),
    "llama3: text after the calls": (
        LLAMA3,
        '{"name": "add", "parameters": {"a": 1}}\nThat is all.',
        "That is all.",
        [("add", '{"a": 1}')],
    ),
    "required: an array of calls": (
        REQUIRED,
        '[{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}, {"name": "add", "arguments": {}}]',
        "",
        [("get_weather", '{"city": "Paris", "days": 2}'), ("add", "{}")],
    ),
    "required: cut off in the second call": (
        REQUIRED,
        '[{"name": "add", "arguments": {"a": 1}}, {"name": "get_weather", "arguments": {"ci',
        "",
        [("add", '{"a": 1}'), ("get_weather", '{"ci')],
    ),
}


def streamed(reading: TurnReading, text: str, cuts: Sequence[int]) -> TurnAnswer:
    """The answer of `text` fed in pieces ending at `cuts`."""
    turn = reading.new_turn()
    events: list[Event] = []
    for start, end in zip([0, *cuts], [*cuts, len(text)], strict=True):
        events.extend(turn.feed(text[start:end]))
    events.extend(turn.finish())
    return answer_of(events)


def summary(answer: TurnAnswer) -> tuple[str, Calls]:
    return answer.content, [(call.name, call.arguments) for call in answer.calls]


@pytest.mark.parametrize("name", list(CASES))
def test_a_text_reads_the_same_whole_and_split_anywhere(name: str) -> None:
    """Reverse-verified: with `partial_marker` answering 0 (nothing held back), the cases with a
    marker after some text failed when split inside it (the marker went out as content); with
    `Nesting.close` blind to strings, the two cases with brackets inside string arguments ended
    their call there; without the check of the name against the tools offered, "a name no tool
    has" was read as a call."""
    reading, text, content, calls = CASES[name]
    whole = read_whole(reading, text)
    assert summary(whole) == (content, calls)
    assert all(call.call_id.startswith("call_") for call in whole.calls)
    for cut in range(len(text) + 1):
        assert summary(streamed(reading, text, [cut])) == (content, calls), f"split at {cut}"
    assert summary(streamed(reading, text, list(range(1, len(text))))) == (content, calls)


def test_arguments_stream_before_the_call_ends_and_a_tag_is_held_back() -> None:
    """The call opens once its name is read and its arguments have begun; each piece of arguments
    comes as it arrives; content that may begin `<tool_call>` waits, and is released as soon as
    it cannot."""
    turn = HERMES.new_turn()
    assert turn.feed("Hi <tool") == [Content("Hi")]
    assert turn.feed("box> and ") == [Content(" <toolbox> and")]
    assert turn.feed('<tool_call>{"name": "add"') == []
    opened = turn.feed(', "arguments": {"a"')
    assert isinstance(opened[0], CallOpened) and opened[0].name == "add" and opened[1:] == [Arguments(0, '{"a"')]
    assert turn.feed(": 1}}\n</tool_call>") == [Arguments(0, ": 1}")]
    assert turn.finish() == [] and turn.called


def test_only_the_first_call_counts_without_parallel_calls() -> None:
    """parallel_tool_calls false: a second call of the turn is dropped, its arguments too.
    Reverse-verified: without the filter in `AssistantTurn._kept`, both calls came back."""
    reading = TurnReading(calls=FamilyCalls("hermes", NAMES), first_call_only=True)
    call = '<tool_call>{"name": "add", "arguments": %s}</tool_call>'
    text = call % '{"a": 1}' + call % "{}"
    assert summary(read_whole(reading, text)) == ("", [("add", '{"a": 1}')])


def test_a_named_call_is_its_arguments() -> None:
    """A call forced by name opens with the first text, and all the text is its arguments; a turn
    that wrote nothing is still the call."""
    turn = TurnReading(calls=NamedCall("add")).new_turn()
    opened, *rest = turn.feed('{"a"')
    assert isinstance(opened, CallOpened) and opened.name == "add" and rest == [Arguments(0, '{"a"')]
    assert turn.feed(": 1}") == [Arguments(0, ": 1}")] and turn.finish() == []
    assert summary(read_whole(TurnReading(calls=NamedCall("add")), "")) == ("", [("add", "")])


def test_without_calls_or_reasoning_the_text_is_content_as_it_comes() -> None:
    turn = TurnReading().new_turn()
    assert turn.feed("<tool_call>{") == [Content("<tool_call>{")] and turn.finish() == []
    assert not turn.called
