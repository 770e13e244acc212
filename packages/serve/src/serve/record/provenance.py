"""Where a leaf's value came from.

A provenance is one of `default`, `file`, `env`, `cli`, `resolved:<handler>` or
`override:<source>`. The first four are layers of operator input in rising precedence; a
resolution handler's declaration is `resolved:<handler>`; a post-publish override is
`override:<source>`.
"""

from __future__ import annotations

OPERATOR_LAYERS: frozenset[str] = frozenset({"file", "env", "cli"})


def resolved_by(handler: str) -> str:
    """The provenance of a value a resolution handler declared."""
    return f"resolved:{handler}"


def overridden_by(source: str) -> str:
    """The provenance of a value a post-publish override set."""
    return f"override:{source}"


def is_operator_set(provenance: str) -> bool:
    """Whether the operator named this value (in a file, the environment or a flag)."""
    return provenance in OPERATOR_LAYERS
