"""This server's process roles and the namespaces of `Bags` each one reads: the table its root
declares (`Bags.ROLES`)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

from config_bags.roles import Roles

Role = Literal["launcher", "http", "tokenizer", "scheduler", "runner", "detokenizer", "standalone"]

ALL_NAMESPACES: frozenset[str] = frozenset(
    {"schedule", "memory", "model", "parallel", "spec", "exec", "disagg", "mm", "serving", "observability", "device"}
)

ROLE_READS: Mapping[Role, frozenset[str]] = MappingProxyType(
    {
        # The launcher resolves and projects everything; a standalone build (a test, a benchmark)
        # stands in for every role at once.
        "launcher": ALL_NAMESPACES,
        "standalone": ALL_NAMESPACES,
        # The HTTP front end, which also tokenizes (serve runs the two in one process).
        # parallel: it routes each request to a data-parallel replica and hears every rank.
        "http": frozenset({"serving", "model", "parallel", "observability"}),
        "tokenizer": frozenset({"model", "serving", "mm", "observability"}),
        # The scheduler and the runner it drives in the same process.
        # spec: the hybrid attention container picks a target verify's half by speculative_attention_mode.
        # parallel: its rank's slice of the model, its group, and its share of the CPU's threads.
        # serving: grammar_backend, the engine it compiles constrained requests' grammars with.
        "scheduler": frozenset(
            {"schedule", "memory", "model", "parallel", "spec", "exec", "device", "observability", "serving"}
        ),
        "runner": frozenset({"schedule", "memory", "model", "parallel", "spec", "exec", "device", "observability"}),
        "detokenizer": frozenset({"model", "serving", "observability"}),
    }
)


# This server's roles: the launcher and a standalone build read every namespace of the published
# root, its extensions' bags included.
_READ_EVERYTHING: tuple[Role, ...] = ("launcher", "standalone")
SERVER_ROLES = Roles(
    {role: reads for role, reads in ROLE_READS.items() if role not in _READ_EVERYTHING}, everything=_READ_EVERYTHING
)
