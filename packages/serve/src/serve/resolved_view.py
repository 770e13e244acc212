"""What the launcher and /server_info need of the resolved launch record, as a protocol (the
record's `ResolvedArgs` fits it); nothing outside `serve` ever holds it."""

from __future__ import annotations

from typing import Any, Protocol

from config_bags.server import Bags
from serve.served_model import ServedModel


class ResolvedConfig(Protocol):
    """The sealed, resolved launch configuration."""

    @property
    def served_model(self) -> ServedModel:
        """The served model's shape, for the rules every process publishes."""
        ...

    def bags(self) -> Bags:
        """The bags this launch publishes."""
        ...

    def provenance(self) -> dict[str, str]:
        """Leaf -> where its value came from."""
        ...

    def dump(self) -> dict[str, Any]:
        """JSON-able: every leaf with its value and provenance."""
        ...
