"""One agent conversation the agent-library tests share: a weather tool, a past turn that called it,
and a new question the default model answers by calling it under tool_choice "auto".

The 135M default model does not decide to call a tool on its own. Shown one past call, it writes
its next turn in the server's tool format, but it writes the past turn's *result*
(`<tool_response>`) where the call (`<tool_call>`) belongs: the two markers share their first
tokens and part at one. `call_steering` is the logit_bias that tips that one token: a request
field any client sends, so each library is tested at its own defaults otherwise. The rest of the
call (name, arguments, closing marker) is the grammar engine's doing under "auto", and once the
tool's result is sent back the same bias leaves the model answering in text.
"""

from __future__ import annotations

import httpx

from serve.tool_calls.generic_format import RESULT_OPEN
from serve.tool_calls.hermes import OPENER

MODEL = "SmolLM2-135M-Instruct"
TOOL_NAME = "get_weather"
TOOL_DESCRIPTION = "Get the current weather in a city."

PAST_QUESTION = "What is the weather in Lima?"
PAST_CITY = "Lima"
PAST_RESULT = "Sunny, 24 C"
PAST_ANSWER = "It is sunny in Lima, 24 C."

QUESTION = "What is the weather in Paris?"
CITY = "Paris"
RESULT = "Rainy, 12 C"

# What the model says once it has the result (greedy, steered): the test's proof that the result reached it.
ANSWER_MENTIONS = ("rain", "12")


def call_steering(base_url: str) -> dict[str, int]:
    """The logit_bias (token id as a string -> bias) that makes the call marker win where the
    model would write the result marker: +10 on the first token where the two differ."""

    def tokens(text: str) -> list[int]:
        response = httpx.post(f"{base_url}/tokenize", json={"prompt": text, "add_special_tokens": False}, timeout=30)
        response.raise_for_status()
        return list(response.json()["tokens"])

    call, result = tokens(OPENER), tokens(RESULT_OPEN)
    differs = next(i for i, (a, b) in enumerate(zip(call, result, strict=False)) if a != b)
    return {str(call[differs]): 10}
