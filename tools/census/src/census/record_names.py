"""How the record is spelled in the scanned code: the names it goes by and the types that mark it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RecordNames:
    """How the record is spelled in the scanned code."""

    names: frozenset[str] = frozenset({"server_args"})
    types: frozenset[str] = frozenset({"ServerArgs"})


# The default: the record as this repository and SGLang spell it.
SERVER_ARGS = RecordNames()
