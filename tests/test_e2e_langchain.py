"""End to end, langchain-openai's `ChatOpenAI` at its own defaults against `serve` on the real
default model with no server flag: `bind_tools` (tool_choice left to the server's default,
"auto") gives a tool call whose result, sent back as a `ToolMessage`, the model answers from;
`with_structured_output` (the library's default method, a strict json_schema response format)
comes back as the typed object; `stream` delivers the answer in chunks that add up to it.

The model is steered to its call by the one token of `serve_testing.weather_agent.call_steering`,
bound as the `logit_bias` request field.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

from serve_testing import weather_agent as conversation
from serve_testing.server import ServerProcess

pytestmark = pytest.mark.timeout(600)


class City(BaseModel):
    name: str
    country: str


@tool
def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return conversation.RESULT


@pytest.fixture(scope="module")
def server(default_model_server: ServerProcess) -> ServerProcess:
    return default_model_server


@pytest.fixture(scope="module")
def llm(server: ServerProcess) -> ChatOpenAI:
    return ChatOpenAI(
        model=conversation.MODEL, base_url=server.base_url + "/v1", api_key="unused", temperature=0, max_retries=0
    )


def past_turn() -> list[BaseMessage]:
    """The conversation so far: a question, its call, the result, the answer, the new question."""
    call: Any = {"name": conversation.TOOL_NAME, "args": {"city": conversation.PAST_CITY}, "id": "call_past"}
    return [
        HumanMessage(conversation.PAST_QUESTION),
        AIMessage("", tool_calls=[call]),
        ToolMessage(conversation.PAST_RESULT, tool_call_id="call_past"),
        AIMessage(conversation.PAST_ANSWER),
        HumanMessage(conversation.QUESTION),
    ]


def test_bound_tools_are_called_and_the_result_answered(server: ServerProcess, llm: ChatOpenAI) -> None:
    """The call comes back parsed (name, arguments as a dict, an id), the tool's `ToolMessage`
    goes back, and the answer is the model's text from it.

    Reverse-verified: with the server's reading of calls under "auto" removed (the turn read as
    content only), langchain's tool_calls came back empty and the test failed."""
    bound = llm.bind_tools([get_weather]).bind(logit_bias=conversation.call_steering(server.base_url))
    messages = past_turn()
    asked = bound.invoke(messages)
    assert isinstance(asked, AIMessage)
    (call,) = asked.tool_calls
    assert call["name"] == conversation.TOOL_NAME and call["args"] == {"city": conversation.CITY}
    result = get_weather.invoke(call)
    assert isinstance(result, ToolMessage) and result.tool_call_id == call["id"]
    answered = bound.invoke([*messages, asked, result])
    assert isinstance(answered, AIMessage) and not answered.tool_calls
    answer = str(answered.content).lower()
    assert all(word in answer for word in conversation.ANSWER_MENTIONS), answer


def test_structured_output_comes_back_as_the_typed_object(llm: ChatOpenAI) -> None:
    """`with_structured_output(City)` parses the server's schema-held answer."""
    city = llm.with_structured_output(City).invoke("Which city is the capital of France?")
    assert isinstance(city, City) and city.name and city.country


def test_a_stream_adds_up_to_the_answer(llm: ChatOpenAI) -> None:
    """Chunks arrive one by one and add up to the whole answer `invoke` gives."""
    chunks = list(llm.stream("What is the capital of France?"))
    assert len(chunks) > 1 and all(isinstance(chunk, AIMessageChunk) for chunk in chunks)
    streamed = "".join(str(chunk.content) for chunk in chunks)
    assert "Paris" in streamed and streamed == llm.invoke("What is the capital of France?").content
