"""The check every embedding forward makes of its inputs before it runs: each holds 1 to the model's
positions of tokens, each a token of its vocabulary (the API refuses these first; a batch that got
here anyway fails as a BatchError, not the process)."""

from __future__ import annotations

from collections.abc import Sequence

from runtime_runner.errors import BatchError


def check_embedding_inputs(inputs: Sequence[Sequence[int]], positions: int, vocab_size: int) -> None:
    """BatchError naming the first input that is empty, longer than `positions`, or holds a token id
    outside 0 to `vocab_size` - 1."""
    for i, ids in enumerate(inputs):
        if not 1 <= len(ids) <= positions:
            raise BatchError(f"input {i} holds {len(ids)} tokens; accepted: 1 to {positions} (the model's positions)")
        outside = [t for t in ids if not 0 <= t < vocab_size]
        if outside:
            raise BatchError(f"input {i} holds token id {outside[0]}; accepted: 0 to {vocab_size - 1}")
