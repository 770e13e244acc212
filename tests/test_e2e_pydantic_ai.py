"""End to end, pydantic-ai at its own defaults against `serve` on the real default model with no
server flag, on both of its OpenAI models (chat completions and Responses): an `Agent` with a
`tool_plain` (sent strict, under tool_choice "auto") runs its tool round trip, and an `Agent` with
an `output_type` (the library's default tool output: a forced call of its `final_result` tool)
comes back as the typed object.

The model is steered to its call by the one token of `serve_testing.weather_agent.call_steering`:
chat's `logit_bias` setting, and the same field through `extra_body` on Responses.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

from serve_testing import weather_agent as conversation
from serve_testing.server import ServerProcess

pytestmark = pytest.mark.timeout(600)

APIS = ["chat", "responses"]


class City(BaseModel):
    name: str
    country: str


@pytest.fixture(scope="module")
def server(default_model_server: ServerProcess) -> ServerProcess:
    return default_model_server


def model_of(server: ServerProcess, api: str) -> OpenAIChatModel | OpenAIResponsesModel:
    """The library's model for `api`, pointed at the server as its README says."""
    provider = OpenAIProvider(base_url=server.base_url + "/v1", api_key="unused")
    if api == "chat":
        return OpenAIChatModel(conversation.MODEL, provider=provider)
    return OpenAIResponsesModel(conversation.MODEL, provider=provider)


def past_turn() -> list[ModelMessage]:
    """The conversation so far, as the library's messages: a question, its call, the result, the answer."""
    call = ToolCallPart(conversation.TOOL_NAME, {"city": conversation.PAST_CITY}, tool_call_id="call_past")
    result = ToolReturnPart(conversation.TOOL_NAME, conversation.PAST_RESULT, tool_call_id="call_past")
    return [
        ModelRequest(parts=[UserPromptPart(conversation.PAST_QUESTION)]),
        ModelResponse(parts=[call]),
        ModelRequest(parts=[result]),
        ModelResponse(parts=[TextPart(conversation.PAST_ANSWER)]),
    ]


@pytest.mark.parametrize("api", APIS)
def test_a_tool_plain_is_called_and_its_result_answered(server: ServerProcess, api: str) -> None:
    """The tool runs once with the model's schema-valid arguments, its result goes back, and the
    output is the model's text from it.

    Reverse-verified: with the Responses request's `logit_bias` left out of the chat request it
    runs as, the responses case failed (no call: the model wrote a tool response as text)."""
    steering = conversation.call_steering(server.base_url)
    settings: ModelSettings = {"temperature": 0}
    settings |= {"logit_bias": steering} if api == "chat" else {"extra_body": {"logit_bias": steering}}
    agent = Agent(model_of(server, api), model_settings=settings)
    cities: list[str] = []

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """Get the current weather in a city."""
        cities.append(city)
        return conversation.RESULT

    result = agent.run_sync(conversation.QUESTION, message_history=past_turn())
    assert cities == [conversation.CITY]
    answer = result.output.lower()
    assert all(word in answer for word in conversation.ANSWER_MENTIONS), answer
    sent_back: list[Any] = [
        part for message in result.new_messages() for part in message.parts if isinstance(part, ToolReturnPart)
    ]
    assert [part.content for part in sent_back] == [conversation.RESULT]


@pytest.mark.parametrize("api", APIS)
def test_an_output_type_comes_back_as_the_typed_object(server: ServerProcess, api: str) -> None:
    """The library forces its output tool; the call's arguments validate as the type."""
    agent = Agent(model_of(server, api), output_type=City, model_settings={"temperature": 0, "max_tokens": 80})
    result = agent.run_sync("Which city is the capital of France?")
    assert isinstance(result.output, City) and result.output.name
