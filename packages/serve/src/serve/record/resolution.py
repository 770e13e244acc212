"""The resolution context handlers work in: they read the record, and change a value only by
declaring it (`declare`), or by requiring it (`require`) when it is a hard requirement.

A declaration never changes a value the operator set (file, env or flag) nor one an earlier
handler required; it is logged either way. A requirement that contradicts the operator's value
raises ResolutionError naming both.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

import msgspec
from config_bags import checked_value, leaf_spec
from runtime_runner import ArchConfig, CheckpointError, UnsupportedConfigError, read_arch_config

from serve.record.errors import ResolutionError
from serve.record.provenance import is_operator_set, resolved_by
from serve.record.server_args import ServerArgs

DefaultModel = Callable[[], Path]


class Declaration(msgspec.Struct, frozen=True):
    """One value a handler declared, and whether the record took it."""

    handler: str
    leaf: str
    value: Any
    applied: bool
    note: str
    why: str


class Resolution:
    """One run of the pipeline over a record copy that takes only declarations."""

    def __init__(self, server_args: ServerArgs, default_model: DefaultModel) -> None:
        self.server_args = server_args
        self.default_model = default_model
        self.declarations: list[Declaration] = []
        self.running: str | None = None
        self.running_why = ""
        self._required: set[str] = set()

    @cached_property
    def model(self) -> ArchConfig:
        """The decoder shape of the checkpoint at model_path, read as the runner reads it (once
        per resolution), so the sizes resolution derives are the sizes the runner builds."""
        if self.server_args.model_path is None:
            raise ResolutionError("model_path is unset when a handler needs the model's config.json; pass --model-path DIR")
        model_dir = Path(self.server_args.model_path)
        try:
            return read_arch_config(model_dir)
        except (CheckpointError, UnsupportedConfigError, ValueError) as err:
            raise ResolutionError(f"model_path {model_dir}: {err}") from None

    def _check_source(self, source: str) -> None:
        if source != self.running:
            raise RuntimeError(f"declare() from {source!r} while handler {self.running!r} runs; a handler declares under its own name")

    def declare(self, source: str, **fields: Any) -> None:
        """Set each leaf the operator did not set and no earlier handler required."""
        self._check_source(source)
        for name, raw in fields.items():
            value = checked_value(leaf_spec(name), raw)
            current = self.server_args.value(name)
            provenance = self.server_args.provenance_of(name)
            if is_operator_set(provenance) or name in self._required:
                note = "agrees" if current == value else f"kept {current!r} ({provenance})"
                self.declarations.append(Declaration(source, name, value, applied=False, note=note, why=self.running_why))
                continue
            self.server_args.put(name, value, resolved_by(source), source, declaring=True)
            self.declarations.append(Declaration(source, name, value, applied=True, note="declared", why=self.running_why))

    def require(self, source: str, why: str, /, **fields: Any) -> None:
        """Set each leaf to a value it must have; ResolutionError when the operator (or an earlier
        requirement) set another. `why` is one clause naming the requirement."""
        self._check_source(source)
        for name, raw in fields.items():
            value = checked_value(leaf_spec(name), raw)
            current = self.server_args.value(name)
            provenance = self.server_args.provenance_of(name)
            fixed = is_operator_set(provenance) or name in self._required
            if fixed and current != value:
                raise ResolutionError(
                    f"{name}={current!r} (from {self.server_args.origin_of(name) or provenance}) conflicts with {source}: "
                    f"{why}; accepted: {name}={value!r}"
                )
            self._required.add(name)
            if not fixed:
                self.server_args.put(name, value, resolved_by(source), source, declaring=True)
            self.declarations.append(Declaration(source, name, value, applied=not fixed, note="required", why=self.running_why))

    def refuse(self, source: str, name: str, accepted: str, why: str) -> ResolutionError:
        """The error for a leaf whose value a hard requirement refuses (raise it)."""
        origin = self.server_args.origin_of(name) or self.server_args.provenance_of(name)
        return ResolutionError(f"{name}={self.server_args.value(name)!r} (from {origin}) is refused by {source}: {why}; accepted: {accepted}")
