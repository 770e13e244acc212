"""What a client asks for: prompt token ids, sampling parameters and stop conditions.

These are the scheduler's inputs, frozen. Each struct checks its own values on construction and
raises ValueError naming the field, the value and what is accepted.
"""

from __future__ import annotations

from typing import Literal

import msgspec

FinishReason = Literal["length", "stop", "abort"]

# What an output constraint's text is: a JSON schema (JSON text), a regular expression, an EBNF
# grammar (GBNF, as llama.cpp and xgrammar write it), or a structural tag (xgrammar's JSON: free
# text in which a trigger opens a part held to its own format, as a tool call's arguments).
ConstraintKind = Literal["json_schema", "regex", "ebnf", "structural_tag"]
CONSTRAINT_KINDS: tuple[ConstraintKind, ...] = ("json_schema", "regex", "ebnf", "structural_tag")

LOGIT_BIAS_LIMIT = 100.0  # OpenAI's bound: a bias in [-100, 100]; -100 bans the token


class OutputConstraint(msgspec.Struct, frozen=True, kw_only=True):
    """What a request's output must match, as text a grammar engine compiles: `kind` says how to
    read `text`. Two constraints with equal fields compile to the same grammar (the compile cache's key)."""

    kind: ConstraintKind
    text: str

    def __post_init__(self) -> None:
        _require(self.kind in CONSTRAINT_KINDS, "kind", self.kind, ", ".join(CONSTRAINT_KINDS))
        _require(isinstance(self.text, str) and self.text != "", "text", self.text, "a non-empty string")


class SamplingParams(msgspec.Struct, frozen=True, kw_only=True):
    """How the next token is drawn; the runner reads these fields (its `SamplingView`)."""

    temperature: float = 0.0  # 0 means greedy
    top_p: float = 1.0  # 1.0 disables
    top_k: int = -1  # -1 disables
    min_p: float = 0.0  # 0.0 disables
    repetition_penalty: float = 1.0  # 1.0 disables
    frequency_penalty: float = 0.0  # 0.0 disables
    presence_penalty: float = 0.0  # 0.0 disables
    seed: int | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    # (token id, bias) pairs added to the logits before sampling, token ids ascending, each once
    logit_bias: tuple[tuple[int, float], ...] = ()
    constraint: OutputConstraint | None = None  # the output must match it (None: free text)

    def __post_init__(self) -> None:
        _require(self.temperature >= 0.0, "temperature", self.temperature, "a float >= 0 (0 means greedy)")
        _require(0.0 < self.top_p <= 1.0, "top_p", self.top_p, "a float in (0, 1]")
        _require(self.top_k == -1 or self.top_k >= 1, "top_k", self.top_k, "-1 (disabled) or an int >= 1")
        _require(0.0 <= self.min_p <= 1.0, "min_p", self.min_p, "a float in [0, 1]")
        _require(self.repetition_penalty > 0.0, "repetition_penalty", self.repetition_penalty, "a float > 0")
        _require(
            -2.0 <= self.frequency_penalty <= 2.0, "frequency_penalty", self.frequency_penalty, "a float in [-2, 2]"
        )
        _require(-2.0 <= self.presence_penalty <= 2.0, "presence_penalty", self.presence_penalty, "a float in [-2, 2]")
        _require(self.top_logprobs >= 0, "top_logprobs", self.top_logprobs, "an int >= 0")
        ids = [t for t, _ in self.logit_bias]
        _require(
            all(t >= 0 for t in ids) and ids == sorted(set(ids)),
            "logit_bias",
            self.logit_bias,
            "(token id, bias) pairs, token ids >= 0, ascending, each once",
        )
        _require(
            all(-LOGIT_BIAS_LIMIT <= b <= LOGIT_BIAS_LIMIT for _, b in self.logit_bias),
            "logit_bias",
            self.logit_bias,
            f"biases in [-{LOGIT_BIAS_LIMIT:g}, {LOGIT_BIAS_LIMIT:g}]",
        )


class StopConditions(msgspec.Struct, frozen=True, kw_only=True):
    """When generation ends: a length cap, stop token ids, and EOS unless ignored.

    Stop strings are not here: the detokenizer matches them and aborts the request.
    """

    max_new_tokens: int = 128
    stop_token_ids: frozenset[int] = frozenset()
    eos_token_ids: frozenset[int] = frozenset()  # the tokenizer's end tokens, filled in by the server
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        _require(self.max_new_tokens >= 1, "max_new_tokens", self.max_new_tokens, "an int >= 1")
        _require(all(t >= 0 for t in self.stop_token_ids), "stop_token_ids", self.stop_token_ids, "token ids >= 0")
        _require(all(t >= 0 for t in self.eos_token_ids), "eos_token_ids", self.eos_token_ids, "token ids >= 0")


class Request(msgspec.Struct, frozen=True, kw_only=True):
    """One generation request: a unique id, the prompt's token ids, sampling and stop conditions."""

    rid: str
    prompt_ids: tuple[int, ...]
    sampling: SamplingParams = msgspec.field(default_factory=SamplingParams)
    stop: StopConditions = msgspec.field(default_factory=StopConditions)

    def __post_init__(self) -> None:
        _require(isinstance(self.rid, str) and self.rid != "", "rid", self.rid, "a non-empty string")
        _require(len(self.prompt_ids) >= 1, "prompt_ids", self.prompt_ids, "at least one token id")
        _require(
            all(isinstance(t, int) and t >= 0 for t in self.prompt_ids), "prompt_ids", self.prompt_ids, "token ids >= 0"
        )


def _require(ok: bool, field: str, value: object, accepted: str) -> None:
    if not ok:
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
        raise ValueError(f"{field}={shown} is not accepted; accepted: {accepted}")
