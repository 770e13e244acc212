"""A cross-encoder's score of each (first, second) text pair, for /v1/rerank and /v1/score: the
pairs tokenized as the tokenizer joins a pair, each within the model's limit (else a 400 naming
it), scored in one request to the encoder."""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from serve.http.admission import new_rid
from serve.http.errors import bad_request
from serve.tokenizer.manager import TokenizerManager
from serve.tokenizer.worker import TokenizerWorker


@dataclass(frozen=True)
class PairScores:
    """Each pair's score, in order, and the tokens of all the pairs."""

    scores: list[float]
    tokens: int


async def pair_scores(
    manager: TokenizerManager,
    worker: TokenizerWorker,
    pairs: Sequence[tuple[str, str]],
    named: Callable[[int], tuple[str, str]],
) -> PairScores:
    """The score of each of `pairs`; a pair over the model's limit is a 400 whose message and param
    are `named(index)` (what the request calls that pair, and the field)."""
    groups: dict[str, list[int]] = {}
    for index, (first, _) in enumerate(pairs):
        groups.setdefault(first, []).append(index)
    by_pair: list[tuple[list[int], list[int]]] = [([], [])] * len(pairs)
    for first, at in groups.items():  # one tokenizer call per distinct first text (rerank's query: one)
        encoded = await worker.encode_pairs(first, [pairs[i][1] for i in at])
        for index, (pair_ids, pair_types) in zip(at, encoded, strict=True):
            by_pair[index] = (list(pair_ids), list(pair_types))
    limit = manager.model_info.context_length
    for index, (ids, _) in enumerate(by_pair):
        if len(ids) > limit:
            what, param = named(index)
            raise bad_request(
                f"{what} holds {len(ids)} tokens, above this model's limit of {limit}; accepted: a pair of at most "
                f"{limit} tokens together",
                param=param,
            )
    outputs = await manager.embed(
        new_rid(), tuple(tuple(ids) for ids, _ in by_pair), tuple(tuple(types) for _, types in by_pair)
    )
    scores = [float(struct.unpack("<f", output)[0]) for output in outputs]
    return PairScores(scores, sum(len(ids) for ids, _ in by_pair))
