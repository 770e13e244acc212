"""POST /v1/embeddings's request, as OpenAI's API takes it (plus vLLM's truncate_prompt_tokens),
and its inputs checked against the served encoder's limits: each a 400 naming the field."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from serve.http.errors import bad_request
from serve.http.protocol import TokenId
from serve.http.request_object import RequestObject
from serve.http.unserved_fields import EMBEDDING_FIELDS

# OpenAI's own limit on the inputs of one request.
MAX_INPUTS = 2048


class EmbeddingsBody(RequestObject):
    """The inputs to embed (a string, strings, token ids, or lists of token ids) and how to answer."""

    unserved = EMBEDDING_FIELDS

    model: str | None = None
    input: str | list[str] | list[TokenId] | list[list[TokenId]]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: Annotated[int, Field(ge=1)] | None = None
    # vLLM's: cut each input to this many tokens (-1: the model's limit) instead of refusing a longer one.
    truncate_prompt_tokens: Annotated[int, Field(ge=-1)] | None = None


def texts_or_ids(body: EmbeddingsBody) -> tuple[list[str], None] | tuple[None, list[list[int]]]:
    """The inputs as texts to tokenize, or as token-id lists; a 400 for none, too many, or an empty one."""
    raw = body.input
    inputs: list[str] | list[list[int]]
    if isinstance(raw, str):
        inputs = [raw]
    elif raw and isinstance(raw[0], int):
        inputs = [[int(t) for t in raw if isinstance(t, int)]]
    else:
        inputs = raw  # type: ignore[assignment]  # pydantic took a list of strings or of id lists
    if not inputs:
        raise bad_request("input is an empty list; accepted: a string, or 1 to 2048 inputs", param="input")
    if len(inputs) > MAX_INPUTS:
        raise bad_request(
            f"input holds {len(inputs)} inputs; accepted: at most {MAX_INPUTS} in one request", param="input"
        )
    for i, one in enumerate(inputs):
        if len(one) == 0:
            what = "an empty string" if isinstance(one, str) else "an empty list of token ids"
            raise bad_request(f"input[{i}] is {what}; accepted: text or token ids to embed", param=f"input[{i}]")
    if isinstance(inputs[0], str):
        return [str(text) for text in inputs], None
    return None, [list(ids) for ids in inputs if not isinstance(ids, str)]


def within_limit(ids: list[int], index: int, limit: int, truncate: int | None, from_text: bool) -> tuple[int, ...]:
    """Input `index`'s ids within the model's `limit` of positions: cut to `truncate` tokens
    (-1: the limit) where the request asks, keeping a tokenized text's closing token (BERT's
    [SEP]); else a 400 naming the limit when it is longer."""
    if truncate is None:
        if len(ids) > limit:
            raise bad_request(
                f"input[{index}] holds {len(ids)} tokens, above this model's limit of {limit}; accepted: at most "
                f"{limit} tokens, or truncate_prompt_tokens to cut it",
                param=f"input[{index}]",
            )
        return tuple(ids)
    keep = limit if truncate == -1 else min(truncate, limit)
    if len(ids) <= keep:
        return tuple(ids)
    return tuple(ids[: keep - 1] + ids[-1:]) if from_text and keep > 1 else tuple(ids[:keep])
