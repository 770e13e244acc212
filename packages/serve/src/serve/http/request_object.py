"""The base of every request model of the API: a JSON object whose every field the server acts on."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator

from serve.http.unserved_fields import NO_FIELDS, Decision, served_fields


class RequestObject(BaseModel):
    """A JSON object of a request whose every field the server acts on: a field the model does
    not declare is refused with a 400 naming it, unless the model's `unserved` table accepts its
    value (one that changes nothing, or metadata); those are dropped before validation. A field
    is named by its JSON name (its alias, where the Python name differs)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    unserved: ClassVar[Mapping[str, Decision]] = NO_FIELDS

    @model_validator(mode="before")
    @classmethod
    def _only_served_fields(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        defaults = {field.alias or name: field.default for name, field in cls.model_fields.items()}
        # OpenAI's API reads null as "the default" for a field that has one, and clients send it
        # for the fields they leave unset.
        return {k: v for k, v in cls.served(data).items() if v is not None or defaults[k] is None}

    @classmethod
    def served(cls, data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        """`data` with the fields the server does not act on dropped, or refused (`refused_field`,
        the field's path being `prefix` + its name)."""
        declared = tuple(field.alias or name for name, field in cls.model_fields.items())
        return served_fields(data, declared, cls.unserved, prefix)
