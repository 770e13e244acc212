"""The resolution context handlers work in: they read the record, change a value only by
declaring it (`declare`), and check hard requirements as rules (`check`), the same rules every
process checks at publish and on override.

A declaration never changes a value the operator set (file, env or flag); it is logged either
way. A broken rule raises ResolutionError stating the rule with its values and origins.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

import msgspec

from config_bags import LeafValueError, Rule, broken_rule, checked_value, leaf_spec
from config_bags.server import Bags
from runtime_runner import ArchConfig, CheckpointError, UnsupportedConfigError
from runtime_runner.loading.checkpoint_source import arch_config_at
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

    @cached_property
    def model(self) -> ArchConfig:
        """The decoder shape of the checkpoint at model_path (config.json, or a GGUF file's
        metadata), read as the runner reads it (once per resolution), so the sizes resolution
        derives are the sizes the runner builds."""
        if self.server_args.model_path is None:
            raise ResolutionError(
                "model_path is unset when a handler needs the model's config.json; pass --model-path DIR"
            )
        model_dir = Path(self.server_args.model_path)
        try:
            return arch_config_at(model_dir)
        except (CheckpointError, UnsupportedConfigError, ValueError) as err:
            raise ResolutionError(f"model_path {model_dir}: {err}") from None

    def _check_source(self, source: str) -> None:
        if source != self.running:
            raise RuntimeError(
                f"declare() from {source!r} while handler {self.running!r} runs; a handler declares under its own name"
            )

    def declare(self, source: str, **fields: Any) -> None:
        """Set each leaf the operator did not set."""
        self._check_source(source)
        for name, raw in fields.items():
            value = checked_value(leaf_spec(name, Bags), raw)
            current = self.server_args.value(name)
            provenance = self.server_args.provenance_of(name)
            if is_operator_set(provenance):
                note = "agrees" if current == value else f"kept {current!r} ({provenance})"
                self.declarations.append(
                    Declaration(source, name, value, applied=False, note=note, why=self.running_why)
                )
                continue
            self.server_args.put(name, value, resolved_by(source), source, declaring=True)
            self.declarations.append(
                Declaration(source, name, value, applied=True, note="declared", why=self.running_why)
            )

    def bags(self) -> Bags:
        """The record as it stands, projected into bags; a value or combination a bag refuses is a
        ResolutionError naming the leaf."""
        try:
            return self.server_args.bags()
        except LeafValueError as err:
            raise ResolutionError(str(err)) from None

    def origin(self, name: str) -> str:
        """Where the operator set `name` (`--page-size 3`, `SERVE_PAGE_SIZE`), else its provenance."""
        provenance = self.server_args.provenance_of(name)
        return (self.server_args.origin_of(name) or provenance) if is_operator_set(provenance) else provenance

    def check(self, *rules: Rule) -> None:
        """Raise ResolutionError for the first of `rules` the record breaks, stating the rule with
        its values and where the operator set each leaf it reads."""
        found = broken_rule(self.bags(), rules)
        if found is None:
            return
        rule, message = found
        origins = [self.origin(n) for n in rule.leaves if self.server_args.provenance_of(n) != "default"]
        where = f"; from {', '.join(origins)}" if origins else ""
        raise ResolutionError(f"{message} (rule {rule.name}{where})")
