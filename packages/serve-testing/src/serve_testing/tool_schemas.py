"""Tool parameter schemas the end-to-end tool tests share."""

from __future__ import annotations

from typing import Any

# Bounded values only: a random model given a free string or integer may fill its budget with it.
WEATHER: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "enum": ["Paris", "Tokyo", "Lima"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 7},
    },
    "required": ["city", "days"],
    "additionalProperties": False,
}
