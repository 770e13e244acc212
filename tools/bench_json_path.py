"""Does a JSON constraint keep the model on its own path? On prompts whose unconstrained answer
writes a JSON object, the share whose constrained answer (`response_format: json_object`) is the
same JSON, and how many of the constrained answers ended by length instead.

    uv run python tools/bench_json_path.py            # launches the default model's server

Each prompt is asked twice, greedy: without a format, and with `json_object`. A prompt counts
when its unconstrained answer writes a whole JSON object (the answer itself, or the first object
in it: the default model often fences it in a json code block or adds a sentence after it); it
then agrees when the constrained answer parses to the same value. The figures go to
docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import httpx

from serve_testing.server import ServerProcess

PROMPTS = (
    "Describe a person called Ada who is 36 and has a cat, as JSON.",
    "Give me a JSON object with the keys name and age for a man called Bob who is 40.",
    "Return a JSON object describing the city of Paris with its country and population.",
    "Write a JSON object for a book: title, author and year.",
    "Output JSON only: a car with make, model and year.",
    "As JSON, describe a dog named Rex who is 3 years old.",
    "Respond with a JSON object that has a key 'greeting' whose value is 'hello'.",
    "Create a JSON object for a product with a name, a price and a list of tags.",
    "Give the weather in Tokyo as a JSON object with temperature and conditions.",
    "Write a JSON object with the fields first_name, last_name and email for Jane Doe.",
    "Describe a movie as JSON with title, director and year.",
    "Return a JSON object listing three colors under the key colors.",
    "As a JSON object, give the name and capital of Italy.",
    "Produce JSON for a user profile: username, followers and verified.",
)


def answer(http: httpx.Client, prompt: str, max_tokens: int, constrained: bool) -> tuple[str, str]:
    """The greedy answer to `prompt` and its finish reason."""
    body: dict[str, Any] = {
        "messages": [{"role": "user", "content": prompt}],
        "temperature": 0,
        "max_tokens": max_tokens,
    }
    if constrained:
        body["response_format"] = {"type": "json_object"}
    response = http.post("/v1/chat/completions", json=body)
    response.raise_for_status()
    choice = response.json()["choices"][0]
    return choice["message"]["content"] or "", choice["finish_reason"]


def json_object_of(text: str) -> dict[str, Any] | None:
    """`text` parsed as one JSON object, None when it is not one."""
    try:
        value = json.loads(text.strip())
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def first_json_object(text: str) -> dict[str, Any] | None:
    """The JSON object the text writes first (from its first `{`), None when none is whole."""
    start = text.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(text, start)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model-path", type=Path, help="checkpoint to serve (default: the default model)")
    p.add_argument("--url", help="a running server to ask instead of launching one")
    p.add_argument("--max-tokens", type=int, default=200)
    p.add_argument("--verbose", action="store_true", help="print every answer")
    args = p.parse_args()
    server = None if args.url else ServerProcess(args.model_path)
    try:
        if server is not None:
            server.wait_ready(timeout_s=600)
        url = args.url or (server.base_url if server is not None else "")
        counted = whole = agreed = by_length = 0
        with httpx.Client(base_url=url, timeout=600) as http:
            for prompt in PROMPTS:
                free, _ = answer(http, prompt, args.max_tokens, constrained=False)
                expected = first_json_object(free)
                if args.verbose:
                    print(f"--- {prompt}\nfree: {free!r}")
                if expected is None:
                    continue
                held, finish = answer(http, prompt, args.max_tokens, constrained=True)
                if args.verbose:
                    print(f"held ({finish}): {held!r}")
                counted += 1
                whole += json_object_of(free) is not None
                agreed += json_object_of(held) == expected
                by_length += finish == "length"
    finally:
        if server is not None:
            server.stop()
    print(
        f"prompts asked: {len(PROMPTS)}; unconstrained answer writes a JSON object: {counted} ({whole} of them whole)"
    )
    print(f"constrained answer the same JSON: {agreed}/{counted}; constrained answers ended by length: {by_length}")


if __name__ == "__main__":
    main()
