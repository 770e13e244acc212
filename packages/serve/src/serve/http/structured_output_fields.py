"""The request objects that ask for structured output: OpenAI's `response_format` and vLLM's
`structured_outputs` (`serve.http.output_constraints` turns them into one constraint)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from serve.http.request_object import RequestObject
from serve.http.unserved_fields import JSON_SCHEMA_FORMAT_FIELDS, STRUCTURED_OUTPUTS_FIELDS


class JsonSchemaFormat(RequestObject):
    """`response_format.json_schema`: a named schema. `strict` is accepted either way: the schema
    is always enforced (a schema the engine cannot enforce is refused)."""

    unserved = JSON_SCHEMA_FORMAT_FIELDS

    name: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9_-]+$")
    description: str | None = None
    schema_: dict[str, Any] | bool = Field(default=True, alias="schema")
    strict: bool | None = None


class ResponseFormat(RequestObject):
    """OpenAI's `response_format`: free text, any JSON object, or JSON matching a schema."""

    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class StructuredOutputs(RequestObject):
    """vLLM's `structured_outputs`: exactly one of a JSON schema, a regex, a choice of strings, an
    EBNF grammar, or any JSON object."""

    unserved = STRUCTURED_OUTPUTS_FIELDS

    json_: dict[str, Any] | str | None = Field(default=None, alias="json")
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None
