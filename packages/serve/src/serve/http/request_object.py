"""The base of every JSON object the API accepts: declared fields are validated, undeclared ones
are dropped or refused by the object's table of `serve.http.unserved_fields`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator

from serve.http.unserved_fields import NO_FIELDS, Decision, served_fields


class RequestObject(BaseModel):
    """A JSON object of a request whose every field the server acts on: a field the model does
    not declare is refused with a 400 naming it, unless the model's `unserved` table accepts its
    value (one that changes nothing, or metadata); those are dropped before validation."""

    model_config = ConfigDict(extra="forbid")
    unserved: ClassVar[Mapping[str, Decision]] = NO_FIELDS

    @model_validator(mode="before")
    @classmethod
    def _only_served_fields(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        # OpenAI's API reads null as "the default" for a field that has one, and clients send it
        # for the fields they leave unset.
        return {k: v for k, v in cls.served(data).items() if v is not None or cls.model_fields[k].default is None}

    @classmethod
    def served(cls, data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
        """`data` with the fields the server does not act on dropped, or refused (`refused_field`,
        the field's path being `prefix` + its name)."""
        return served_fields(data, tuple(cls.model_fields), cls.unserved, prefix)
