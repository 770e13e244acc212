"""End to end, openai-agents at its own defaults against `serve` on the real default model with no
server flag: an `Agent` with a `function_tool` (strict, under tool_choice "auto", as the library
sends it) runs its tool round trip on the library's default Responses model and on its
chat-completions model; an `output_type` comes back as the typed object; a streamed run delivers
its text as deltas and ends with the same answer.

The model is steered to its call by the one token of `serve_testing.weather_agent.call_steering`
(sent through the library's `extra_body`); tracing is off because the library would otherwise
export traces to OpenAI's servers, which says nothing about this one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
)
from agents.items import MessageOutputItem, ToolCallItem, ToolCallOutputItem
from openai import AsyncOpenAI
from openai.types.responses import ResponseTextDeltaEvent
from pydantic import BaseModel

from serve_testing import weather_agent as conversation
from serve_testing.server import ServerProcess

pytestmark = pytest.mark.timeout(600)

UNTRACED = RunConfig(tracing_disabled=True)


class City(BaseModel):
    name: str
    country: str


@pytest.fixture(scope="module")
def server(default_model_server: ServerProcess) -> ServerProcess:
    return default_model_server


@pytest.fixture
def client(server: ServerProcess) -> Iterator[AsyncOpenAI]:
    # One client per test: the library runs each test in an event loop of its own.
    yield AsyncOpenAI(base_url=server.base_url + "/v1", api_key="unused", max_retries=0, timeout=300)


def past_turn_items() -> list[Any]:
    """The conversation so far, as Responses items: a question, its call, the result, the answer."""
    arguments = json.dumps({"city": conversation.PAST_CITY})
    return [
        {"role": "user", "content": conversation.PAST_QUESTION},
        {"type": "function_call", "call_id": "call_past", "name": conversation.TOOL_NAME, "arguments": arguments},
        {"type": "function_call_output", "call_id": "call_past", "output": conversation.PAST_RESULT},
        {"role": "assistant", "content": conversation.PAST_ANSWER},
        {"role": "user", "content": conversation.QUESTION},
    ]


@pytest.mark.parametrize("api", ["responses", "chat_completions"])
def test_an_agent_calls_its_tool_and_answers_from_the_result(
    server: ServerProcess, client: AsyncOpenAI, api: str
) -> None:
    """The tool is called with schema-valid arguments, the library runs it and sends its result
    back, and the final answer is the model's text from that result.

    Reverse-verified: with the Responses request's `logit_bias` left out of the chat request it
    runs as, the responses case failed (no call: the model wrote a tool response as text)."""
    cities: list[str] = []

    @function_tool
    def get_weather(city: str) -> str:
        """Get the current weather in a city."""
        cities.append(city)
        return conversation.RESULT

    model = (
        OpenAIResponsesModel(conversation.MODEL, client)
        if api == "responses"
        else OpenAIChatCompletionsModel(conversation.MODEL, client)
    )
    settings = ModelSettings(temperature=0, extra_body={"logit_bias": conversation.call_steering(server.base_url)})
    agent = Agent(name="weather", tools=[get_weather], model=model, model_settings=settings)
    result = Runner.run_sync(agent, input=past_turn_items(), run_config=UNTRACED)

    assert cities == [conversation.CITY]
    kinds = [type(item) for item in result.new_items]
    assert kinds == [ToolCallItem, ToolCallOutputItem, MessageOutputItem], kinds
    answer = str(result.final_output).lower()
    assert all(word in answer for word in conversation.ANSWER_MENTIONS), answer


def test_an_output_type_comes_back_as_the_typed_object(client: AsyncOpenAI) -> None:
    """`output_type` is sent as a strict json_schema text format and parsed by the library."""
    model = OpenAIResponsesModel(conversation.MODEL, client)
    settings = ModelSettings(temperature=0, max_tokens=60)
    agent = Agent(name="cities", model=model, output_type=City, model_settings=settings)
    result = Runner.run_sync(agent, input="Which city is the capital of France?", run_config=UNTRACED)
    assert isinstance(result.final_output, City) and result.final_output.name


def test_a_streamed_run_delivers_its_answer_as_deltas(client: AsyncOpenAI) -> None:
    """The streamed events the library parses: text deltas that add up to the final output."""
    model = OpenAIResponsesModel(conversation.MODEL, client)
    agent = Agent(name="plain", model=model, model_settings=ModelSettings(temperature=0, max_tokens=24))

    async def streamed() -> tuple[str, str]:
        run = Runner.run_streamed(agent, input="What is the capital of France?", run_config=UNTRACED)
        deltas = [
            event.data.delta
            async for event in run.stream_events()
            if event.type == "raw_response_event" and isinstance(event.data, ResponseTextDeltaEvent)
        ]
        return "".join(deltas), str(run.final_output)

    text, final = asyncio.run(streamed())
    assert len(text) > 0 and text == final and "Paris" in final
