"""The rules of this server's bags that depend on the served checkpoint, which the stack that
knows the checkpoint publishes with its bags (serve's launch rules):

- `SNAPSHOT_GRID`: a hybrid model's snapshots lie on the page and chunk grid;
- `context_length_within_model(n)`: the context length against the model's own maximum.
"""

from __future__ import annotations

from config_bags.rules import Rule
from config_bags.server.derived import context_length_refusal, snapshot_grid_refusal
from config_bags.server.root import Bags


def _snapshot_grid(bags: Bags) -> str | None:
    return snapshot_grid_refusal(bags.exec.mamba, bags.schedule)


SNAPSHOT_GRID = Rule(
    "snapshot_interval_on_grid", ("mamba_snapshot_interval", "page_size", "chunked_prefill_size"), _snapshot_grid
)


def context_length_within_model(model_max_length: int) -> Rule:
    """The rule that the served context length does not exceed the model's own maximum."""

    def broken(bags: Bags) -> str | None:
        return context_length_refusal(bags.model, model_max_length)

    return Rule("context_length_within_model", ("context_length",), broken)
