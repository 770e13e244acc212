"""The server's own tool format, for a model whose chat template has no tool syntax (the default
model's): the conversation is rewritten before the template renders it, so any template that
renders system, user and assistant messages renders tools too (as llama.cpp does for templates it
does not know).

- The tools offered are listed in a system message (appended to the conversation's own, or first
  when it has none): one JSON object per function (name, description, parameters schema), then
  how to call one, in the `<tool_call>` syntax (`serve.tool_calls.hermes`), which is how the
  model's calls are read and, under tool_choice "auto", held to their schemas.
- An assistant turn's calls are written into its content in that syntax.
- Tool results become a user message, each result in `<tool_response>` tags; consecutive results
  share one message (templates that insist on alternating roles accept it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from serve.tool_calls.hermes import written_call

RESULT_OPEN, RESULT_CLOSE = "<tool_response>", "</tool_response>"
_HOW_TO_CALL = (
    "To call a tool, write:\n"
    '<tool_call>\n{"name": <tool name>, "arguments": <arguments as a JSON object>}\n</tool_call>\n'
    f"Each result comes back as {RESULT_OPEN}...{RESULT_CLOSE}. When no tool is needed, answer in text."
)


def tools_section(tools: Sequence[Mapping[str, Any]]) -> str:
    """The system text that offers `tools` (OpenAI's tools entries) and tells how to call them."""
    listed = "\n".join(json.dumps(tool["function"], ensure_ascii=False) for tool in tools)
    return f"You can call these tools:\n{listed}\n{_HOW_TO_CALL}"


def generic_conversation(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """`messages` (as the chat template is given them) with the tools, calls and results written
    as text in the server's format."""
    rewritten: list[dict[str, Any]] = []
    results: dict[str, Any] | None = None  # the user message the latest run of results went into
    for message in messages:
        if message["role"] == "tool":
            result = f"{RESULT_OPEN}\n{message['content']}\n{RESULT_CLOSE}"
            if results is not None:
                results["content"] += "\n" + result
            else:
                results = {"role": "user", "content": result}
                rewritten.append(results)
            continue
        results = None
        if message.get("tool_calls"):
            calls = [written_call(c["function"]["name"], c["function"]["arguments"]) for c in message["tool_calls"]]
            text = "\n".join([message["content"], *calls] if message["content"] else calls)
            rewritten.append({k: v for k, v in message.items() if k != "tool_calls"} | {"content": text})
        else:
            rewritten.append(dict(message))
    if tools:
        section = tools_section(tools)
        if rewritten and rewritten[0]["role"] == "system":
            rewritten[0]["content"] = f"{rewritten[0]['content']}\n\n{section}" if rewritten[0]["content"] else section
        else:
            rewritten.insert(0, {"role": "system", "content": section})
    return rewritten
