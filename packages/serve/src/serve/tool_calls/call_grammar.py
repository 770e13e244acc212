"""What the call grammars of every family share: a call as an xgrammar structural-tag `tag` (its
text up to the arguments, the arguments held to the function's schema with the model's own
whitespace, bounded, then the text that closes it), and a structural-tag format as the
constraint the scheduler runs."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from runtime_scheduler import OutputConstraint
from serve.grammar.xgrammar_engine import JSON_WHITESPACE_RUN


def call_tag(head: str, parameters: Mapping[str, Any], end: str) -> dict[str, Any]:
    """A call that opens with `head`, whose arguments match `parameters`, closed by `end`."""
    content = {"type": "json_schema", "json_schema": parameters, "max_whitespace_cnt": JSON_WHITESPACE_RUN}
    return {"type": "tag", "begin": head, "content": content, "end": end}


def structural_tag(form: Mapping[str, Any]) -> OutputConstraint:
    """The constraint whose grammar is the structural-tag format `form`."""
    return OutputConstraint(kind="structural_tag", text=json.dumps({"type": "structural_tag", "format": form}))
